// The tcp transport: tcp://host:port over Asio's TCP sockets.
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <memory>
#include <string>

#include "transport/socket_listener.h"
#include "transport/socket_stream.h"
#include "transport/tls/tls_stream.h"
#include "wcomm/errors.h"

namespace wcomm::transport {
namespace {

using asio::ip::tcp;

std::string endpoint_text(const tcp::endpoint& e) {
  const std::string host = e.address().to_string();
  return (e.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(e.port());
}

// Keepalive finds a dead peer where nothing else would (a V0.1 peer sends no heartbeats).
void set_keepalive(tcp::socket& socket, const Options& options) {
  if (options.keepalive_idle_s <= 0) return;
  std::error_code ec;
  socket.set_option(asio::socket_base::keep_alive(true), ec);
  socket.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_KEEPIDLE>(options.keepalive_idle_s), ec);
  socket.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_KEEPINTVL>(options.keepalive_interval_s), ec);
  socket.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_KEEPCNT>(3), ec);
}

// accepting: this side accepted the connection (the TLS server, with options.tls).
std::unique_ptr<Connection> wrap(tcp::socket socket, const Options& options, bool accepting) {
  std::error_code ec;
  socket.set_option(tcp::no_delay(options.tcp_nodelay), ec);
  set_keepalive(socket, options);
  if (options.tcp_notsent_lowat_bytes > 0)
    socket.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_NOTSENT_LOWAT>(options.tcp_notsent_lowat_bytes),
                      ec);
  if (options.tcp_max_pacing_rate_bytes_per_second > 0)
    socket.set_option(
        asio::detail::socket_option::integer<SOL_SOCKET, SO_MAX_PACING_RATE>(
            static_cast<int>(options.tcp_max_pacing_rate_bytes_per_second)),
        ec);
  const auto local = socket.local_endpoint(ec);
  const auto remote = socket.remote_endpoint(ec);
  std::string description = "tcp " + endpoint_text(local) + " <-> " + endpoint_text(remote);
  if (!options.tls) return make_socket_stream(std::move(socket), std::move(description), options.tcp_target_queue_delay);
  asio::any_io_executor executor = socket.get_executor();
  const int fd = socket.release(ec);
  return make_tls_stream(std::move(executor), ec ? -1 : fd, std::move(description), options.tls, accepting,
                         options.tcp_target_queue_delay);
}

class TcpTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "tcp"; }

  std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address,
                                   const Options& options) const override {
    std::error_code ec;
    tcp::resolver resolver(io);
    auto results = resolver.resolve(address.host, std::to_string(address.port), tcp::resolver::passive, ec);
    if (ec || results.empty())
      throw ConnectionFailedError("cannot resolve bind address '" + address.host + "': " + ec.message());
    const tcp::endpoint endpoint = results.begin()->endpoint();
    tcp::acceptor acceptor(io);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      throw ConnectionFailedError("cannot listen on " + address.to_string() + ": " + ec.message() +
                                  " (is another node using that port, or is the address not local?)");
    Address bound = address;
    bound.port = acceptor.local_endpoint().port();
    return std::make_unique<SocketListener<tcp>>(std::move(acceptor), std::move(bound),
                                                 [options](tcp::socket s) { return wrap(std::move(s), options, true); });
  }

  std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                    const Options& options, DialHandler handler) const override {
    auto socket = std::make_shared<tcp::socket>(io);
    auto attempt = make_socket_dial(socket, deadline);
    auto done = [socket, options, handler = std::move(handler)](std::error_code ec) {
      if (ec) return handler(ec, nullptr);
      handler({}, wrap(std::move(*socket), options, false));
    };
    std::error_code parse_error;
    const auto numeric = asio::ip::make_address(address.host, parse_error);
    if (!parse_error) {  // no resolver (its async form spawns a thread)
      attempt->connect(tcp::endpoint(numeric, address.port), std::move(done));
      return attempt;
    }
    auto resolver = std::make_shared<tcp::resolver>(io);
    resolver->async_resolve(address.host, std::to_string(address.port),
                            [resolver, attempt, done](std::error_code ec, tcp::resolver::results_type results) {
                              if (!ec && results.empty()) ec = asio::error::host_not_found;
                              if (ec) return attempt->fail(ec, done);
                              attempt->connect(results.begin()->endpoint(), done);
                            });
    return attempt;
  }
};

}  // namespace

const Transport& tcp_transport() {
  static const TcpTransport transport;
  return transport;
}

}  // namespace wcomm::transport
