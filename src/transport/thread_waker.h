// A per-thread eventfd that a thread waits on beside a connection while it reads for a recv,
// so that a completion from elsewhere (another connection, cancel, close) can wake it; and
// the sleep on several connections at once that Connection::wait_readable and
// ReadOwner::read_any share.
#pragma once

#include <chrono>
#include <ctime>
#include <span>

#include "core/operation.h"
#include "transport/transport.h"

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

// What ended a wait_any_readable besides readable connections.
struct WaitEnd {
  bool woken = false;     // the waker was woken (and is cleared)
  bool extra = false;     // extra_fd is readable
  bool deadline = false;  // the deadline passed with nothing readable
};
// The reader's thread sleeps until one of connections has bytes (or its end) to read, waker
// is woken, extra_fd (if >= 0; not consumed) is readable, or the deadline passes.
// readable[i] (same size as connections) then says which connections to read: every one
// after an interrupted poll (a read finds nothing and the caller waits again).
WaitEnd wait_any_readable(std::span<Connection* const> connections, std::span<bool> readable,
                          std::chrono::steady_clock::time_point deadline, ThreadWaker& waker, int extra_fd = -1);

}  // namespace wcomm::transport
