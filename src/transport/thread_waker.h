// A per-thread eventfd that a thread waits on beside a connection while it reads for a recv,
// so that a completion from elsewhere (another connection, cancel, close) can wake it.
#pragma once

#include "core/operation.h"

namespace wcomm::transport {

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
