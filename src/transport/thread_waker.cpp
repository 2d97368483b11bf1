#include "transport/thread_waker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace wcomm::transport {

ThreadWaker::ThreadWaker() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

ThreadWaker::~ThreadWaker() {
  if (fd_ >= 0) ::close(fd_);
}

void ThreadWaker::wake() { ::eventfd_write(fd_, 1); }

void ThreadWaker::clear() {
  eventfd_t ignored;
  ::eventfd_read(fd_, &ignored);
}

ThreadWaker& this_thread_waker() {
  thread_local ThreadWaker waker;
  return waker;
}

WaitEnd wait_any_readable(std::span<Connection* const> connections, std::span<bool> readable,
                          std::chrono::steady_clock::time_point deadline, ThreadWaker& waker, int extra_fd) {
  // One wait at a time per thread: its lists are kept for the next (no allocation per wait).
  thread_local std::vector<pollfd> fds;
  thread_local std::vector<std::size_t> starts;  // where each connection's entries begin
  fds.clear();
  starts.clear();
  bool any_now = false;
  for (std::size_t i = 0; i < connections.size(); ++i) {
    starts.push_back(fds.size());
    readable[i] = connections[i]->prepare_wait(fds) == Connection::Prepared::kReadable;
    any_now = any_now || readable[i];
  }
  starts.push_back(fds.size());
  const std::size_t own = fds.size();
  fds.push_back({waker.fd(), POLLIN, 0});
  if (extra_fd >= 0) fds.push_back({extra_fd, POLLIN, 0});
  WaitEnd end;
  int ready = 0;
  if (!any_now) {
    // ppoll, not poll: a Python recv waits 200 us, not a whole millisecond.
    const PollTimeout timeout(deadline);
    if (!timeout.passed()) ready = ::ppoll(fds.data(), fds.size(), timeout.get(), nullptr);
  }
  for (std::size_t i = 0; i < connections.size(); ++i) {
    if (readable[i]) continue;  // prepared as readable: nothing to finish
    const std::span<const pollfd> mine(fds.data() + starts[i], starts[i + 1] - starts[i]);
    connections[i]->finish_wait(mine);
    readable[i] = ready < 0 || std::any_of(mine.begin(), mine.end(), [](const pollfd& p) { return p.revents != 0; });
  }
  if (ready > 0 && fds[own].revents) {
    waker.clear();
    end.woken = true;
  }
  end.extra = ready > 0 && extra_fd >= 0 && fds[own + 1].revents;
  end.deadline = ready == 0 && !any_now;
  return end;
}

Connection::Wait Connection::wait_readable(Clock::time_point deadline, ThreadWaker& waker) {
  Connection* self = this;
  bool readable = false;
  const WaitEnd end = wait_any_readable({&self, 1}, {&readable, 1}, deadline, waker);
  if (readable) return Wait::kReadable;
  if (end.woken) return Wait::kWoken;
  return end.deadline ? Wait::kDeadline : Wait::kReadable;
}

}  // namespace wcomm::transport
