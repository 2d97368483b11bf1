// Transport addresses: where a node listens and how a peer is reached. Written as URLs:
// tcp://host:port, unix:///path/to/socket, unix://@name (Linux abstract socket), and
// shm:///path or shm://@name (shared-memory rings, set up over a Unix socket at that name),
// ucx://host:port (UCX: a UCP listener on that socket address; RDMA where there is RDMA).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wcomm {

struct Address {
  std::string scheme;  // "tcp", "unix", "shm" or "ucx" (a transport's name; see docs/cpp-api.md)
  std::string host;    // tcp, ucx: a name or a numeric address ("::1", not "[::1]")
  std::uint16_t port = 0;
  std::string path;    // unix, shm: a file path, or the name of an abstract socket
  bool abstract = false;

  static Address tcp(std::string host, std::uint16_t port);
  // Parses a URL; throws InvalidArgumentError naming the text and what is wrong with it.
  // tcp and ucx ports must be 1..65535 unless allow_port_zero (a listener asking for an ephemeral port).
  static Address parse(std::string_view text, bool allow_port_zero = false);
  std::string to_string() const;  // the URL form parse() accepts
  friend bool operator==(const Address&, const Address&) = default;
};

}  // namespace wcomm
