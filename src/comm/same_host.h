// Transport selection (CommConfig::transport, Peer::transport): which addresses a peer is
// dialed at, and the name a node listens at for peers on its own host.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wcomm/config.h"

namespace wcomm {

// The transport that applies to peer: its own, else the Comm's.
const std::string& transport_for(const Peer& peer, const CommConfig& config);

// Where a node listens for peers on its own host over scheme ("shm" or "unix"): an abstract
// socket named after its node_id and TCP host:port, which both sides know from the peer
// directory. Only a process on this host, in this network namespace (abstract names are
// per namespace), can answer there. nullopt for a node without a TCP host and port.
std::optional<Address> same_host_address(const Peer& node, std::string_view scheme);

// The addresses peer is dialed at, in order: auto tries the same-host shm name first, then
// the peer's own addresses; shm and unix use the same-host name and the peer's addresses of
// that scheme; tcp only its tcp addresses. With TLS (CommConfig::tls) only tcp addresses.
std::vector<Address> dial_endpoints(const Peer& peer, const CommConfig& config);

}  // namespace wcomm
