// close_lingering: the end of stream, then the peer's, then close (lingering_close.h).
#include "transport/lingering_close.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

namespace wcomm::transport {
namespace {

class Lingerer : public std::enable_shared_from_this<Lingerer> {
 public:
  Lingerer(const asio::any_io_executor& executor, int fd) : socket_(executor, fd), timer_(executor) {}

  void start(std::chrono::steady_clock::duration linger) {
    if (drained()) return end();
    timer_.expires_after(linger);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->end();  // the peer did not end in time: close over what is left
    });
    wait();
  }

 private:
  void wait() {
    socket_.async_wait(asio::posix::stream_descriptor::wait_read, [self = shared_from_this()](std::error_code ec) {
      if (ec) return;  // end() closed it
      if (self->drained()) return self->end();
      self->wait();
    });
  }
  // Reads and drops what has arrived. True at the peer's end of stream or a failure.
  bool drained() {
    char sink[16 << 10];
    while (true) {
      const ssize_t n = ::recv(socket_.native_handle(), sink, sizeof sink, MSG_DONTWAIT);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    }
  }
  void end() {
    timer_.cancel();
    std::error_code ignored;
    socket_.close(ignored);
  }

  asio::posix::stream_descriptor socket_;
  asio::steady_timer timer_;
};

}  // namespace

void close_lingering(const asio::any_io_executor& executor, int fd, std::chrono::steady_clock::duration linger) {
  ::shutdown(fd, SHUT_WR);  // after the bytes the kernel holds
  std::shared_ptr<Lingerer> lingerer;
  try {
    lingerer = std::make_shared<Lingerer>(executor, fd);  // registers fd with the loop's reactor
  } catch (const std::exception&) {
    ::close(fd);  // (no memory, or the reactor refused it: close as before)
    return;
  }
  lingerer->start(linger);
}

}  // namespace wcomm::transport
