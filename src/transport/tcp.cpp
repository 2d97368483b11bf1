// TCP transport on Asio: a Stream over a connected socket, the listener and the dialer.
#include "transport/tcp.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include <memory>
#include <utility>

namespace wcomm::transport {
namespace {

// asio's transfer_all caps each read/write system call at 64 KiB, which halves loopback
// goodput; let one call move as much as the kernel takes.
struct TransferAllInLargeSteps {
  std::size_t operator()(const std::error_code& ec, std::size_t) const { return ec ? 0 : std::size_t{1} << 30; }
};

class TcpStream final : public Stream {
 public:
  explicit TcpStream(asio::ip::tcp::socket socket) : socket_(std::move(socket)) {
    std::error_code ec;
    auto local = socket_.local_endpoint(ec);
    auto remote = socket_.remote_endpoint(ec);
    description_ = "tcp " + local.address().to_string() + ":" + std::to_string(local.port()) + " <-> " +
                   remote.address().to_string() + ":" + std::to_string(remote.port());
  }
  ~TcpStream() override { close(); }

  void async_read(std::vector<asio::mutable_buffer> buffers, IoHandler handler) override {
    asio::async_read(socket_, std::move(buffers), TransferAllInLargeSteps{}, std::move(handler));
  }
  void async_write(std::vector<asio::const_buffer> buffers, IoHandler handler) override {
    asio::async_write(socket_, std::move(buffers), TransferAllInLargeSteps{}, std::move(handler));
  }
  std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) override {
    std::size_t total = 0, skip = 0;
    while (true) {
      iovec iov[64];
      std::size_t n = 0, offset = skip;
      for (const auto& b : buffers) {
        if (n == 64) break;
        if (offset >= b.size()) {
          offset -= b.size();
          continue;
        }
        iov[n++] = {const_cast<char*>(static_cast<const char*>(b.data())) + offset, b.size() - offset};
        offset = 0;
      }
      if (n == 0) return total;
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = n;
      ssize_t sent = ::sendmsg(socket_.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ec = std::error_code(errno, std::system_category());
        return total;
      }
      total += static_cast<std::size_t>(sent);
      skip += static_cast<std::size_t>(sent);
    }
  }
  void try_write_now(const void* data, std::size_t size) override {
    if (socket_.is_open()) ::send(socket_.native_handle(), data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  void close() override {
    std::error_code ec;
    if (!socket_.is_open()) return;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }
  std::string describe() const override { return description_; }

 private:
  asio::ip::tcp::socket socket_;
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
