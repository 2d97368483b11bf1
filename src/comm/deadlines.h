// Deadlines as data: the one mechanism by which a send or a recv with a timeout ends there.
// Each side of a peer keeps its operations' deadlines in a DeadlineList, under the guard of
// its operations (the outbox's: the loop; the inbox's: its lock); the peer's one
// DeadlineTimer, on the loop, fires at the earliest of both sides, and whichever side's
// operations are due fail with a timeout there, whoever was working on them meanwhile.
#pragma once

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <optional>

#include "comm/operation.h"

namespace wcomm {

class DeadlineList {
 public:
  using Clock = std::chrono::steady_clock;

  // Keeps op's deadline (none, i.e. max: nothing is kept). True: it comes before the time the
  // timer was last armed for on this list's behalf, so the caller must arm it for it (in a
  // stream of operations with one timeout: never).
  [[nodiscard]] bool keep(CommOperation& op);
  // Op is done, or no longer ends at its deadline (a frame is being read into it).
  void forget(CommOperation& op);
  // The earliest operation whose deadline has come, forgotten here; null when none is due.
  CommOperation* pop_due(Clock::time_point now);
  // After the due ones were popped: the time the timer is to be armed for next on this
  // list's behalf (max: none), noted as armed for.
  Clock::time_point rearm();

 private:
  DeadlineEntries entries_;
  Clock::time_point armed_for_ = Clock::time_point::max();  // or about to be
};

// A peer's one timer (loop only). Armed for the earliest time it is asked for; when that
// comes it calls `expire`, which fails what is due on both sides and returns the next
// deadline (max: none), and it is armed for that.
class DeadlineTimer {
 public:
  using Clock = std::chrono::steady_clock;
  DeadlineTimer(asio::io_context& io, std::function<Clock::time_point()> expire)
      : io_(io), expire_(std::move(expire)) {}
  void arm_for(Clock::time_point at);
  void stop();  // closing: it fires no more

 private:
  asio::io_context& io_;
  std::function<Clock::time_point()> expire_;
  std::optional<asio::steady_timer> timer_;
  Clock::time_point armed_for_ = Clock::time_point::max();
  bool stopped_ = false;
};

}  // namespace wcomm
