// SocketStream: a Connection over a connected stream socket's descriptor.
#include "transport/socket_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <optional>
#include <utility>

#include "transport/lingering_close.h"
#include "transport/tcp/send_queue_bound.h"
#include "transport/thread_waker.h"

namespace wcomm::transport {
namespace {

constexpr int kEndOfStream = -1;  // a pseudo errno: recvmsg returned 0

// Moves bytes between the socket and buffers (after their first `skip` bytes) with one
// non-blocking system call per up-to-64 buffers until the kernel takes or has no more.
template <class Buffers, class Call>
std::size_t move_now(const Buffers& buffers, std::size_t skip, std::error_code& ec, Call call) {
  std::size_t total = 0;
  while (true) {
    iovec iov[64];
    std::size_t n = 0, offset = skip;
    for (const auto& b : buffers) {
      if (n == 64) break;
      if (offset >= b.size()) {
        offset -= b.size();
        continue;
      }
      iov[n++] = {static_cast<char*>(const_cast<void*>(static_cast<const void*>(b.data()))) + offset, b.size() - offset};
      offset = 0;
    }
    if (n == 0) return total;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t moved = call(msg);
    if (moved < 0) {
      if (errno == EINTR) continue;
      if (errno == kEndOfStream) ec = asio::error::eof;
      else if (errno != EAGAIN && errno != EWOULDBLOCK) ec = std::error_code(errno, asio::error::get_system_category());
      return total;
    }
    total += static_cast<std::size_t>(moved);
    skip += static_cast<std::size_t>(moved);
  }
}

// A connected socket that asio's reactor does not hold. A descriptor registered there wakes
// the loop thread on every arriving segment, even with nothing waiting on it: a context
// switch per message while a caller's thread does the reading. So the loop watches the
// socket only while it waits on it, through a duplicate descriptor registered on demand.
class SocketStream final : public Connection {
 public:
  SocketStream(asio::any_io_executor executor, int fd, std::string description, std::chrono::microseconds queue_target)
      : executor_(std::move(executor)), fd_(fd), description_(std::move(description)) {
    if (queue_target.count() > 0) queue_bound_.emplace(queue_target);
    int domain = 0;
    socklen_t len = sizeof domain;
    unix_ = fd_ >= 0 && ::getsockopt(fd_, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX;
  }
  ~SocketStream() override { close(); }

  void async_write(std::vector<asio::const_buffer> buffers, IoHandler handler) override {
    transfer(std::move(buffers), 0, std::move(handler), true);
  }
  std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) override {
    return move_now(buffers, 0, ec, [fd = fd_](msghdr& msg) { return ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL); });
  }
  void try_write_now(const void* data, std::size_t size) override {
    if (fd_ >= 0) ::send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  std::size_t try_read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip,
                       std::error_code& ec) override {
    return move_now(buffers, skip, ec, [fd = fd_](msghdr& msg) {
      ssize_t got = ::recvmsg(fd, &msg, MSG_DONTWAIT);
      if (got == 0) errno = kEndOfStream;
      return got == 0 ? ssize_t{-1} : got;
    });
  }
  std::size_t try_peek(void* data, std::size_t size, std::error_code& ec) override {
    while (true) {
      ssize_t got = ::recv(fd_, data, size, MSG_PEEK | MSG_DONTWAIT);
      if (got > 0) return static_cast<std::size_t>(got);
      if (got == 0) ec = asio::error::eof;
      else if (errno == EINTR) continue;
      else if (errno != EAGAIN && errno != EWOULDBLOCK) ec = std::error_code(errno, asio::error::get_system_category());
      return 0;
    }
  }
  Traits traits() const override {
    Traits t;
    t.name = unix_ ? "unix" : "tcp";
    t.same_host = unix_;
    t.measures_link = !unix_;
    // A receive costs a system call, however little it takes: small frames are read several
    // at a time (1 KiB messages over unix took five recvmsg each, reading header, manifest
    // and payload one by one; tcp two, with its peek).
    t.reads_ahead = true;
    // A Unix stream socket's MSG_PEEK cost grows with what is queued (here the kernel's peek
    // was 30% of the reader's time at 1 KiB messages, and unix ran at 0.66x tcp; reading
    // header and manifest one by one, 1.1x); TCP's does not.
    t.cheap_peek = !unix_;
    return t;
  }
  std::string peer_host() const override { return unix_ ? std::string() : remote_host_of(description_); }
  void async_wait_readable(std::function<void(std::error_code)> handler) override {
    watch(false, std::move(handler));
  }
  void stop_waiting_readable() override { read_watch_.reset(); }

  Prepared prepare_wait(std::vector<pollfd>& fds) override {
    fds.push_back({fd_, POLLIN, 0});
    return Prepared::kPolling;
  }

  void shutdown(bool keep_receiving) override {
    // The loop lets go of the socket now (its waits see operation_aborted), so nothing of it
    // stays registered with Asio until the descriptor itself is closed, maybe much later.
    read_watch_.reset();
    write_watch_.reset();
    if (fd_ >= 0) ::shutdown(fd_, keep_receiving ? SHUT_WR : SHUT_RDWR);
  }
  void close() override {
    // Dropping the watchers cancels their waits: pending operations see operation_aborted.
    read_watch_.reset();
    write_watch_.reset();
    if (fd_ < 0) return;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    fd_ = -1;
  }
  void close_gracefully(std::chrono::steady_clock::duration linger) override {
    read_watch_.reset();
    write_watch_.reset();
    if (fd_ < 0) return;
    close_lingering(executor_, fd_, linger);
    fd_ = -1;
  }
  std::string describe() const override { return description_; }
  std::uint64_t send_bound_bytes() const override { return queue_bound_ ? queue_bound_->bytes() : 0; }

 private:
  bool unix_ = false;  // an AF_UNIX stream (traits)
  // Writes what the kernel takes now; if that is not all, waits for the socket and goes on.
  // Like asio's operations, the handler never runs inside the call that started it.
  void transfer(std::vector<asio::const_buffer> buffers, std::size_t done, IoHandler handler, bool first) {
    std::error_code ec;
    if (fd_ < 0) ec = asio::error::bad_descriptor;
    else done += move_now(buffers, done, ec, [fd = fd_](msghdr& msg) {
      return ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    });
    if (ec || done == asio::buffer_size(buffers)) {
      hand_over(done);  // in the kernel now, though the handler runs later
      if (!first) write_watch_.reset();  // its registration would wake the loop on reads
      if (!first) return handler(ec, done);
      return asio::post(executor_, [handler = std::move(handler), ec, done] { handler(ec, done); });
    }
    if (queue_bound_) queue_bound_->on_write_blocked(fd_);  // full, with more to write
    watch(true, [this, buffers = std::move(buffers), done, handler = std::move(handler)](std::error_code ec) mutable {
      if (ec) return handler(ec, done);  // cancelled by close(): the stream may be gone
      transfer(std::move(buffers), done, std::move(handler), false);
    });
  }

  void watch(bool write, std::function<void(std::error_code)> handler) {
    auto& watcher = write ? write_watch_ : read_watch_;
    if (std::error_code ec = watch_duplicate(watcher, executor_, fd_))
      return asio::post(executor_, [handler = std::move(handler), ec] { handler(ec); });
    watcher->async_wait(write ? asio::posix::stream_descriptor::wait_write : asio::posix::stream_descriptor::wait_read,
                        std::move(handler));
  }

  asio::any_io_executor executor_;
  int fd_ = -1;
  std::optional<asio::posix::stream_descriptor> read_watch_, write_watch_;
  std::string description_;
  std::optional<SendQueueBound> queue_bound_;
};

}  // namespace

std::error_code watch_duplicate(std::optional<asio::posix::stream_descriptor>& watcher,
                                const asio::any_io_executor& executor, int fd) {
  if (watcher) return {};
  if (fd < 0) return asio::error::bad_descriptor;
  const int duplicate = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (duplicate < 0) return {errno, asio::error::get_system_category()};
  watcher.emplace(executor, duplicate);
  return {};
}

std::unique_ptr<Connection> make_socket_stream_from_fd(asio::any_io_executor executor, int fd,
                                                       std::string description,
                                                       std::chrono::microseconds queue_target) {
  return std::make_unique<SocketStream>(std::move(executor), fd, std::move(description), queue_target);
}

}  // namespace wcomm::transport
