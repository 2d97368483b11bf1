#include "transport/thread_waker.h"

#include <sys/eventfd.h>
#include <unistd.h>

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

}  // namespace wcomm::transport
