// CompletionQueue: the loop thread -> asyncio hand-off (see completion_queue.h).
#include "completion_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

namespace wcomm::python {

CompletionQueue::CompletionQueue() {
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(std::string("eventfd failed: ") + std::strerror(errno));
}

CompletionQueue::~CompletionQueue() {
  if (fd_ >= 0) ::close(fd_);
}

void CompletionQueue::push(Completion completion) {
  bool was_empty;
  {
    std::lock_guard lock(mu_);
    was_empty = items_.empty();
    items_.push_back(std::move(completion));
    nonempty_.store(true, std::memory_order_release);
  }
  if (was_empty) {
    std::uint64_t one = 1;
    // Cannot fail short of a counter overflow (2^64-2 unread signals), which one signal per
    // batch never reaches.
    [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof one);
  }
}

std::vector<Completion> CompletionQueue::take() {
  std::uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(fd_, &count, sizeof count);  // EAGAIN when not signalled
  std::vector<Completion> out;
  std::lock_guard lock(mu_);
  out.swap(items_);
  nonempty_.store(false, std::memory_order_relaxed);
  return out;
}

bool CompletionQueue::spin_until_nonempty(std::chrono::microseconds limit) const {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!nonempty_.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace wcomm::python
