// Unix stream socket helpers (unix_socket.h).
#include "transport/unix/unix_socket.h"

#include <sys/stat.h>
#include <unistd.h>

#include "wcomm/errors.h"

namespace wcomm::transport {

using asio::local::stream_protocol;

stream_protocol::endpoint unix_endpoint(const Address& address) {
  // asio keeps the length it is given, so the leading nul of an abstract name survives.
  return stream_protocol::endpoint(address.abstract ? std::string(1, '\0') + address.path : address.path);
}

namespace {
// A socket file left behind by a process that died: nothing listens on it any more.
bool is_stale_socket(asio::io_context& io, const Address& address) {
  struct stat info {};
  if (address.abstract || ::lstat(address.path.c_str(), &info) != 0 || !S_ISSOCK(info.st_mode)) return false;
  stream_protocol::socket probe(io);
  std::error_code ec;
  probe.connect(unix_endpoint(address), ec);
  return ec == asio::error::connection_refused;
}
}  // namespace

stream_protocol::acceptor listen_unix(asio::io_context& io, const Address& address) {
  stream_protocol::acceptor acceptor(io);
  std::error_code ec;
  acceptor.open(stream_protocol(), ec);
  if (!ec) acceptor.bind(unix_endpoint(address), ec);
  if (ec == asio::error::address_in_use && is_stale_socket(io, address)) {
    ::unlink(address.path.c_str());
    ec.clear();
    acceptor.bind(unix_endpoint(address), ec);
  }
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw ConnectionFailedError("cannot listen on " + address.to_string() + ": " + ec.message() +
                                (ec == asio::error::address_in_use ? " (another node listens there)" : ""));
  return acceptor;
}

void unlink_unix(const Address& address) {
  if (!address.abstract) ::unlink(address.path.c_str());
}

}  // namespace wcomm::transport
