// Time helpers of the benchmark: monotonic intervals and the report's wall-clock timestamps.
#pragma once

#include <chrono>
#include <string>

namespace wcomm::bench {

using BenchClock = std::chrono::steady_clock;

inline double seconds_between(BenchClock::time_point from, BenchClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Now in UTC as Python's datetime.now(timezone.utc).isoformat() writes it:
// 2026-11-29T16:41:27.463432+00:00 (the form of V0.1's started_at / finished_at).
std::string utc_timestamp_now();

}  // namespace wcomm::bench
