// TCP transport on Asio: a Stream over a connected socket, the listener and the dialer.
#include "transport/tcp.h"

#include <sys/socket.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include <memory>
#include <optional>
#include <utility>

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
      else if (errno != EAGAIN && errno != EWOULDBLOCK) ec = std::error_code(errno, std::system_category());
      return total;
    }
    total += static_cast<std::size_t>(moved);
    skip += static_cast<std::size_t>(moved);
  }
}

// A connected TCP socket that asio's reactor does not hold. A descriptor registered there
// wakes the loop thread on every arriving segment, even with nothing waiting on it: a
// context switch per message while a caller's thread does the reading. So the loop watches
// the socket only while it waits on it, through a duplicate descriptor registered on demand.
class TcpStream final : public Stream {
 public:
  explicit TcpStream(asio::ip::tcp::socket socket) : executor_(socket.get_executor()) {
    std::error_code ec;
    auto local = socket.local_endpoint(ec);
    auto remote = socket.remote_endpoint(ec);
    description_ = "tcp " + local.address().to_string() + ":" + std::to_string(local.port()) + " <-> " +
                   remote.address().to_string() + ":" + std::to_string(remote.port());
    fd_ = socket.release(ec);
  }
  ~TcpStream() override { close(); }

  void async_read(std::vector<asio::mutable_buffer> buffers, IoHandler handler) override {
    transfer(false, std::move(buffers), 0, std::move(handler), true);
  }
  void async_write(std::vector<asio::const_buffer> buffers, IoHandler handler) override {
    std::vector<asio::mutable_buffer> writable;  // one vector type for both directions
    writable.reserve(buffers.size());
    for (const auto& b : buffers) writable.emplace_back(const_cast<void*>(b.data()), b.size());
    transfer(true, std::move(writable), 0, std::move(handler), true);
  }
  std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) override {
    return move_now(buffers, 0, ec, [fd = fd_](msghdr& msg) { return ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL); });
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
      else if (errno != EAGAIN && errno != EWOULDBLOCK) ec = std::error_code(errno, std::system_category());
      return 0;
    }
  }
  void async_wait_readable(std::function<void(std::error_code)> handler) override {
    watch(false, std::move(handler));
  }
  void stop_waiting_readable() override { read_watch_.reset(); }
  int native_handle() override { return fd_; }
  void try_write_now(const void* data, std::size_t size) override {
    if (fd_ >= 0) ::send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  void shutdown() override {
    // The loop lets go of the socket now (its waits see operation_aborted), so nothing of it
    // stays registered with Asio until the descriptor itself is closed, maybe much later.
    read_watch_.reset();
    write_watch_.reset();
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
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
  std::string describe() const override { return description_; }

 private:
  // Moves what the kernel takes now; if that is not all, waits for the socket and goes on.
  // Like asio's operations, the handler never runs inside the call that started it.
  void transfer(bool write, std::vector<asio::mutable_buffer> buffers, std::size_t done, IoHandler handler,
                bool first) {
    std::error_code ec;
    if (fd_ < 0) ec = asio::error::bad_descriptor;
    else if (write) done += move_now(buffers, done, ec, [fd = fd_](msghdr& msg) {
      return ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    });
    else done += try_read(buffers, done, ec);
    if (ec || done == asio::buffer_size(buffers)) {
      if (write && !first) write_watch_.reset();  // its registration would wake the loop on reads
      if (!first) return handler(ec, done);
      return asio::post(executor_, [handler = std::move(handler), ec, done] { handler(ec, done); });
    }
    watch(write, [this, write, buffers = std::move(buffers), done, handler = std::move(handler)](std::error_code ec) mutable {
      if (ec) return handler(ec, done);  // cancelled by close(): the stream may be gone
      transfer(write, std::move(buffers), done, std::move(handler), false);
    });
  }

  void watch(bool write, std::function<void(std::error_code)> handler) {
    auto& watcher = write ? write_watch_ : read_watch_;
    if (!watcher) {
      const int duplicate = fd_ < 0 ? -1 : ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
      if (duplicate < 0) {
        std::error_code ec = fd_ < 0 ? std::error_code(asio::error::bad_descriptor)
                                     : std::error_code(errno, std::system_category());
        return asio::post(executor_, [handler = std::move(handler), ec] { handler(ec); });
      }
      watcher.emplace(executor_, duplicate);
    }
    watcher->async_wait(write ? asio::posix::stream_descriptor::wait_write : asio::posix::stream_descriptor::wait_read,
                        std::move(handler));
  }

  asio::any_io_executor executor_;
  int fd_ = -1;
  std::optional<asio::posix::stream_descriptor> read_watch_, write_watch_;
  std::string description_;
};

void apply_options(asio::ip::tcp::socket& socket, const TcpOptions& options) {
  std::error_code ec;
  socket.set_option(asio::ip::tcp::no_delay(options.nodelay), ec);
}

}  // namespace

std::unique_ptr<Stream> make_tcp_stream(asio::ip::tcp::socket socket, const TcpOptions& options) {
  apply_options(socket, options);
  return std::make_unique<TcpStream>(std::move(socket));
}

TcpListener::TcpListener(asio::io_context& io, const std::string& host, std::uint16_t port, TcpOptions options)
    : acceptor_(io), options_(options) {
  std::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), asio::ip::tcp::resolver::passive, ec);
  if (ec || results.empty())
    throw ConnectionFailedError("cannot resolve bind address '" + host + "': " + ec.message());
  auto endpoint = results.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw ConnectionFailedError("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message() +
                                " (is another node using that port, or is the address not local?)");
  port_ = acceptor_.local_endpoint().port();
}

void TcpListener::start(AcceptHandler handler) {
  handler_ = std::move(handler);
  accept_next();
}

void TcpListener::accept_next() {
  acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      handler_(ec, nullptr);
    } else {
      handler_({}, make_tcp_stream(std::move(socket), options_));
    }
    accept_next();
  });
}

void TcpListener::close() {
  std::error_code ec;
  acceptor_.close(ec);
}

void async_dial_tcp(asio::io_context& io, const std::string& host, std::uint16_t port, TcpOptions options,
                    DialHandler handler) {
  auto socket = std::make_shared<asio::ip::tcp::socket>(io);
  std::error_code parse_error;
  auto address = asio::ip::make_address(host, parse_error);
  if (!parse_error) {  // a numeric address needs no resolver (whose async form spawns a thread)
    socket->async_connect({address, port}, [socket, options, handler = std::move(handler)](std::error_code ec) {
      if (ec) return handler(ec, nullptr);
      handler({}, make_tcp_stream(std::move(*socket), options));
    });
    return;
  }
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io);
  resolver->async_resolve(
      host, std::to_string(port),
      [resolver, socket, options, handler = std::move(handler)](std::error_code ec,
                                                                asio::ip::tcp::resolver::results_type results) mutable {
        if (ec) return handler(ec, nullptr);
        asio::async_connect(*socket, results,
                            [socket, options, handler = std::move(handler)](std::error_code ec, const auto&) {
                              if (ec) return handler(ec, nullptr);
                              handler({}, make_tcp_stream(std::move(*socket), options));
                            });
      });
}

}  // namespace wcomm::transport
