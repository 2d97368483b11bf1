#include "comm/thread_wake.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "wcomm/future.h"

namespace wcomm {
namespace {

struct ThreadWakeFd {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ~ThreadWakeFd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

int this_thread_wake_fd() {
  thread_local ThreadWakeFd wake;
  return wake.fd;
}

void clear_wake_fd(int fd) {
  eventfd_t ignored;
  ::eventfd_read(fd, &ignored);
}

namespace detail {
void signal_wake_fd(int fd) { ::eventfd_write(fd, 1); }
}  // namespace detail

}  // namespace wcomm
