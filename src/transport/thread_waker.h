// A per-thread eventfd that a thread waits on beside a connection while it reads for a recv,
// so that a completion from elsewhere (another connection, cancel, close) can wake it.
#pragma once

#include <chrono>
#include <ctime>

#include "core/operation.h"

namespace wcomm::transport {

// ppoll's timeout for a wait that ends at deadline (steady_clock::time_point::max(): never).
class PollTimeout {
 public:
  explicit PollTimeout(std::chrono::steady_clock::time_point deadline)
      : forever_(deadline == std::chrono::steady_clock::time_point::max()) {
    if (forever_) return;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now()).count();
    passed_ = left <= 0;
    ts_.tv_sec = static_cast<time_t>(left / 1'000'000'000);
    ts_.tv_nsec = static_cast<long>(left % 1'000'000'000);
  }
  bool passed() const { return passed_; }  // the deadline is here: do not wait
  const timespec* get() const { return forever_ ? nullptr : &ts_; }

 private:
  bool forever_, passed_ = false;
  timespec ts_{};
};

class ThreadWaker final : public detail::Waker {
 public:
  ThreadWaker();
  ~ThreadWaker() override;
  ThreadWaker(const ThreadWaker&) = delete;
  ThreadWaker& operator=(const ThreadWaker&) = delete;

  bool valid() const { return fd_ >= 0; }
  void wake() override;  // any thread
  void clear();          // the owning thread, after a wake-up
  int fd() const { return fd_; }  // for transports that poll it

 private:
  int fd_;
};

// This thread's waker (made on first use, closed when the thread ends).
ThreadWaker& this_thread_waker();

}  // namespace wcomm::transport
