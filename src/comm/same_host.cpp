// Transport selection: see same_host.h.
#include "comm/same_host.h"

#include <cstdint>
#include <cstdio>

namespace wcomm {

const std::string& transport_for(const Peer& peer, const CommConfig& config) {
  return peer.transport.empty() ? config.transport : peer.transport;
}

std::optional<Address> same_host_address(const Peer& node, std::string_view scheme) {
  if (node.host.empty() || node.port == 0) return std::nullopt;
  std::string name = "wcomm/" + node.node_id + "/" + node.host + ":" + std::to_string(node.port);
  if (name.size() > 100) {
    // Too long for a socket name: a stable hash of it (FNV-1a; both sides compute the same).
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    name = "wcomm/" + std::string(hex);
  }
  Address a;
  a.scheme = std::string(scheme);
  a.path = std::move(name);
  a.abstract = true;
  return a;
}

std::vector<Address> dial_endpoints(const Peer& peer, const CommConfig& config) {
  const std::string& transport = transport_for(peer, config);
  std::vector<Address> out;
  const std::string scheme = transport == "auto" ? "shm" : transport;
  // With TLS, auto never takes the same-host shortcut: only TLS streams carry messages.
  if (config.tls.enabled()) {
    for (const Address& a : peer.endpoints())
      if (a.scheme == "tcp") out.push_back(a);
    return out;
  }
  if (scheme == "shm" || scheme == "unix")  // tcp and ucx: only the peer's own addresses
    if (auto same_host = same_host_address(peer, scheme)) out.push_back(*same_host);
  for (const Address& a : peer.endpoints())
    if (transport == "auto" || a.scheme == transport) out.push_back(a);
  return out;
}

}  // namespace wcomm
