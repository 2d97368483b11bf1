// Timeouts and deadlines with saturating arithmetic. Every timeout wcomm accepts (seconds, as
// a double: CommOptions::timeout, connect_timeout_s, a Future's wait_for) becomes a deadline
// here: one longer than the steady clock can hold from now (about 292 years of nanoseconds;
// 1e10 s is one) is "no deadline", never an overflow. What is not a timeout at all (NaN, a
// negative value) is refused where it is given (timeout_problem).
#pragma once

#include <chrono>
#include <cmath>
#include <optional>
#include <string>

namespace wcomm {

using SteadyClock = std::chrono::steady_clock;

// The deadline `timeout` after `now`; SteadyClock::time_point::max() (never) when that is at
// or past what the clock can hold, or the timeout is infinite. Zero or less: now.
template <class Rep, class Period>
SteadyClock::time_point deadline_after(std::chrono::duration<Rep, Period> timeout,
                                       SteadyClock::time_point now = SteadyClock::now()) {
  const double seconds = std::chrono::duration<double>(timeout).count();
  if (!(seconds > 0)) return now;  // (NaN too: check_timeout refuses it where it is given)
  // Seconds left on the clock, less a second for the rounding of a double of that size.
  const double room = std::chrono::duration<double>(SteadyClock::time_point::max() - now).count() - 1.0;
  if (seconds >= room) return SteadyClock::time_point::max();
  return now + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

// The time from now until deadline, never negative (max() stays max()).
inline SteadyClock::duration time_left(SteadyClock::time_point deadline, SteadyClock::time_point now = SteadyClock::now()) {
  if (deadline == SteadyClock::time_point::max()) return SteadyClock::duration::max();
  return deadline > now ? deadline - now : SteadyClock::duration::zero();
}

// Why `seconds` is not a timeout wcomm accepts (nullopt: it is): NaN and negative values are
// refused; 0 means "now" and +infinity "never", as does anything too long for the clock.
inline std::optional<std::string> timeout_problem(double seconds) {
  if (std::isnan(seconds)) return "is NaN; give a number of seconds (>= 0; inf for no limit)";
  if (seconds < 0) return "is negative; give a number of seconds (>= 0; inf for no limit)";
  return std::nullopt;
}

}  // namespace wcomm
