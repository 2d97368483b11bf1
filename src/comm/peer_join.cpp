// Peers that join at run time (CommConfig::accept_unknown_peers): the check at create, the
// directory entry an unknown dialer's HELLO describes, and its admission once the handshake
// (with the cluster key proof or TLS certificate) checked out. Loop thread, except
// check_join_policy (Comm::create).
#include <asio/ip/address.hpp>
#include <spdlog/spdlog.h>

#include "comm/comm_impl.h"

namespace wcomm {

namespace {

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  std::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  return !ec && address.is_loopback();
}

bool unspecified_host(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "::"; }

}  // namespace

void check_join_policy(const CommSpec& spec) {
  const CommConfig& c = spec.comm;
  if (!c.accept_unknown_peers || !c.cluster_key.empty() || c.tls.enabled()) return;
  if (!c.allow_unauthenticated_joins)
    throw InvalidArgumentError(
        "comm.accept_unknown_peers needs comm.cluster_key (cluster_key_file) or comm.tls: without either any "
        "process that can reach this node could join under any name. On loopback or unix addresses only, "
        "allow_unauthenticated_joins: true accepts joins without them");
  std::vector<std::string> hosts;
  for (const Address& a : spec.local.endpoints())
    if (a.scheme == "tcp" || a.scheme == "ucx") hosts.push_back(a.host);
  if (!spec.bind_host.empty()) hosts.push_back(spec.bind_host);
  for (const std::string& host : hosts)
    if (!is_loopback_host(host))
      throw InvalidArgumentError("comm.allow_unauthenticated_joins: this node listens on '" + host +
                                 "', which is not loopback; unauthenticated joins are allowed only on loopback and "
                                 "unix addresses (give comm.cluster_key or comm.tls)");
}

// A wcomm dialer lists where it listens ("listen=<url>", docs/wire-format.md). An unspecified
// host (0.0.0.0, ::) is the host the connection came from.
Result<Peer> Comm::Impl::joining_peer(const Control& hello, const std::string& source_host) const {
  const std::string who = "HELLO from unknown node '" + hello.node_id + "'";
  if (!spec.comm.accept_unknown_peers)
    return Error{ErrorCode::kProtocol, who + " (not in this node's peer directory)"};
  std::vector<Address> listening;
  for (const std::string& f : hello.features) {
    if (f.rfind("listen=", 0) != 0) continue;
    try {
      listening.push_back(Address::parse(f.substr(7)));
    } catch (const InvalidArgumentError& e) {
      return Error{ErrorCode::kProtocol, who + ": its listen address is malformed: " + e.what()};
    }
    Address& a = listening.back();
    if (a.scheme == "tcp" && unspecified_host(a.host)) a.host = source_host.empty() ? "127.0.0.1" : source_host;
  }
  Peer peer = Peer::at(hello.node_id, std::move(listening));
  if (peer.endpoints().empty())
    return Error{ErrorCode::kProtocol, who + " that lists no listen address (a V0.1 node cannot join; list it in peers)"};
  try {
    check_peer(*this, peer);
  } catch (const InvalidArgumentError& e) {
    return Error{ErrorCode::kProtocol, who + ": " + e.what()};
  }
  return peer;
}

Result<PeerState*> Comm::Impl::join_peer(Peer peer, const std::string& source) {
  // The same node may have joined meanwhile over another connection (both sides dialing).
  if (PeerState* there = find_peer(peer.node_id)) return there;
  if (peers.current().size() >= spec.comm.max_peers)
    return Error{ErrorCode::kConnectionFailed, "node '" + peer.node_id + "' cannot join: the directory holds max_peers (" +
                                                   std::to_string(spec.comm.max_peers) + ") peers"};
  const std::string node_id = peer.node_id;
  const std::string where = peer.endpoints_text();
  if (!peers.add(std::make_unique<PeerState>(*this, std::move(peer)))) return find_peer(node_id);
  spdlog::info("wcomm[{}]: node '{}' joined from {} (listening at {})", spec.local.node_id, node_id, source, where);
  report(PeerEvent{node_id, PeerEvent::Kind::kJoined, "from " + source});
  return find_peer(node_id);
}

}  // namespace wcomm
