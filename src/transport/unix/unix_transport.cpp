// The unix transport: unix:///path and unix://@name (Linux abstract namespace) over Unix
// stream sockets, for peers on one host.
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "transport/socket_listener.h"
#include "transport/socket_stream.h"
#include "wcomm/errors.h"

namespace wcomm::transport {
namespace {

using asio::local::stream_protocol;

stream_protocol::endpoint endpoint_of(const Address& address) {
  // An abstract socket's name starts with a nul byte; asio keeps the length it is given.
  return stream_protocol::endpoint(address.abstract ? std::string(1, '\0') + address.path : address.path);
}

std::unique_ptr<Connection> wrap(stream_protocol::socket socket, const Address& address) {
  return make_socket_stream(std::move(socket), "unix " + address.to_string());
}

// A socket file left behind by a process that died: nothing listens on it any more.
bool is_stale_socket(asio::io_context& io, const Address& address) {
  struct stat info {};
  if (address.abstract || ::lstat(address.path.c_str(), &info) != 0 || !S_ISSOCK(info.st_mode)) return false;
  stream_protocol::socket probe(io);
  std::error_code ec;
  probe.connect(endpoint_of(address), ec);
  return ec == asio::error::connection_refused;
}

// Removes its socket file when the listener goes.
class UnixListener final : public SocketListener<stream_protocol> {
 public:
  using SocketListener::SocketListener;
  ~UnixListener() override { close(); }
  void close() override {
    SocketListener::close();
    const Address a = address();
    if (!a.abstract && !unlinked_) ::unlink(a.path.c_str());
    unlinked_ = true;
  }

 private:
  bool unlinked_ = false;
};

class UnixTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "unix"; }

  std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address, const Options&) const override {
    stream_protocol::acceptor acceptor(io);
    std::error_code ec;
    acceptor.open(stream_protocol(), ec);
    if (!ec) acceptor.bind(endpoint_of(address), ec);
    if (ec == asio::error::address_in_use && is_stale_socket(io, address)) {
      ::unlink(address.path.c_str());
      ec.clear();
      acceptor.bind(endpoint_of(address), ec);
    }
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      throw ConnectionFailedError("cannot listen on " + address.to_string() + ": " + ec.message() +
                                  (ec == asio::error::address_in_use ? " (another node listens there)" : ""));
    return std::make_unique<UnixListener>(std::move(acceptor), address, [address](stream_protocol::socket s) {
      return wrap(std::move(s), address);
    });
  }

  std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                    const Options&, DialHandler handler) const override {
    auto socket = std::make_shared<stream_protocol::socket>(io);
    auto attempt = make_socket_dial(socket, deadline);
    attempt->connect(endpoint_of(address), [socket, address, handler = std::move(handler)](std::error_code ec) {
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
