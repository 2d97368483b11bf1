// The unix transport: unix:///path and unix://@name (Linux abstract namespace) over Unix
// stream sockets, for peers on one host.
#include <memory>
#include <string>

#include "transport/socket_listener.h"
#include "transport/socket_stream.h"
#include "transport/unix/unix_socket.h"
#include "wcomm/errors.h"

namespace wcomm::transport {
namespace {

using asio::local::stream_protocol;

std::unique_ptr<Connection> wrap(stream_protocol::socket socket, const Address& address) {
  return make_socket_stream(std::move(socket), "unix " + address.to_string());
}

// Removes its socket file when the listener goes.
class UnixListener final : public SocketListener<stream_protocol> {
 public:
  using SocketListener::SocketListener;
  ~UnixListener() override { close(); }
  void close() override {
    SocketListener::close();
    const Address a = address();
    if (!unlinked_) unlink_unix(a);
    unlinked_ = true;
  }

 private:
  bool unlinked_ = false;
};

class UnixTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "unix"; }

  std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address, const Options&) const override {
    return std::make_unique<UnixListener>(listen_unix(io, address), address, [address](stream_protocol::socket s) {
      return wrap(std::move(s), address);
    });
  }

  std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                    const Options&, DialHandler handler) const override {
    auto socket = std::make_shared<stream_protocol::socket>(io);
    auto attempt = make_socket_dial(socket, deadline);
    attempt->connect(unix_endpoint(address), [socket, address, handler = std::move(handler)](std::error_code ec) {
      if (ec) return handler(ec, nullptr);
      handler({}, wrap(std::move(*socket), address));
    });
    return attempt;
  }
};

}  // namespace

const Transport& unix_transport() {
  static const UnixTransport transport;
  return transport;
}

}  // namespace wcomm::transport
