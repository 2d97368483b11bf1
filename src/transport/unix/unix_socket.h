// Binding and naming Unix stream sockets, shared by the unix transport and the shm transport
// (which sets its rings up over one): abstract names, stale socket files, clear errors.
#pragma once

#include <asio.hpp>

#include "wcomm/address.h"

namespace wcomm::transport {

// The socket address of unix:// or shm:// address (an abstract name starts with a nul byte).
asio::local::stream_protocol::endpoint unix_endpoint(const Address& address);

// A listening acceptor at address; a socket file left behind by a dead process is replaced.
// Throws ConnectionFailedError naming the address when it cannot listen.
asio::local::stream_protocol::acceptor listen_unix(asio::io_context& io, const Address& address);

// Removes address's socket file (nothing for an abstract name).
void unlink_unix(const Address& address);

}  // namespace wcomm::transport
