// EventWakeup over a Linux eventfd.
#include "wcomm/mesh/event_wakeup.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace wcomm::mesh {

EventWakeup::EventWakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd for an EventWakeup");
}

EventWakeup::~EventWakeup() { ::close(fd_); }

void EventWakeup::set() {
  const std::uint64_t one = 1;
  // Only a counter at its maximum refuses (EAGAIN), and then a poll will end anyway.
  while (::write(fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

bool EventWakeup::drain() {
  std::uint64_t count = 0;
  ssize_t n;
  while ((n = ::read(fd_, &count, sizeof count)) < 0 && errno == EINTR) {
  }
  return n == sizeof count;
}

}  // namespace wcomm::mesh
