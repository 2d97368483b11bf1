// Dict <-> CommConfig / NodeConfig conversions (see config_bridge.h).
#include "config_bridge.h"

#include <string>

#include "errors_bridge.h"

namespace wcomm::python {
namespace {

// One table of every field keeps the two directions in step.
template <class Fn>
void for_each_field(CommConfig& c, Fn&& fn) {
  fn("max_message_bytes", c.max_message_bytes);
  fn("max_manifest_bytes", c.max_manifest_bytes);
  fn("max_metadata_bytes", c.max_metadata_bytes);
  fn("max_segments", c.max_segments);
  fn("max_container_depth", c.max_container_depth);
  fn("max_container_nodes", c.max_container_nodes);
  fn("max_peer_queued_messages", c.max_peer_queued_messages);
  fn("max_peer_queued_bytes", c.max_peer_queued_bytes);
  fn("max_peer_unreceived_messages", c.max_peer_unreceived_messages);
  fn("max_peer_unreceived_bytes", c.max_peer_unreceived_bytes);
  fn("connect_timeout_s", c.connect_timeout_s);
  fn("allow_unsafe_pickle", c.allow_unsafe_pickle);
  fn("tcp_nodelay", c.tcp_nodelay);
  fn("egress_quantum_bytes", c.egress_quantum_bytes);
  fn("egress_rate_bytes_per_second", c.egress_rate_bytes_per_second);
  fn("egress_burst_bytes", c.egress_burst_bytes);
  fn("recv_busy_poll_us", c.recv_busy_poll_us);
  fn("heartbeat_interval_s", c.heartbeat_interval_s);
  fn("handshake_timeout_s", c.handshake_timeout_s);
  fn("reconnect_backoff_initial_s", c.reconnect_backoff_initial_s);
  fn("reconnect_backoff_max_s", c.reconnect_backoff_max_s);
  fn("transport", c.transport);
  fn("max_pending_handshakes", c.max_pending_handshakes);
  fn("max_pending_handshakes_per_source", c.max_pending_handshakes_per_source);
  fn("egress_max_bulk_flows", c.egress_max_bulk_flows);
  fn("chunk_bytes", c.chunk_bytes);
  fn("tcp_notsent_lowat_bytes", c.tcp_notsent_lowat_bytes);
  fn("tcp_max_pacing_rate_bytes_per_second", c.tcp_max_pacing_rate_bytes_per_second);
  fn("tcp_target_queue_delay_us", c.tcp_target_queue_delay_us);
  fn("compression", c.compression);
  fn("accept_unknown_peers", c.accept_unknown_peers);
  fn("allow_unauthenticated_joins", c.allow_unauthenticated_joins);
  fn("max_peers", c.max_peers);
  fn("cluster_key", c.cluster_key);  // bytes in Python
  fn("tls_cert_file", c.tls.cert_file);  // Python's CommConfig.tls (a TlsConfig), flattened
  fn("tls_key_file", c.tls.key_file);
  fn("tls_ca_file", c.tls.ca_file);
}

}  // namespace

CommConfig config_from_dict(const py::dict& fields) {
  CommConfig c;
  std::size_t used = 0;
  for_each_field(c, [&](const char* name, auto& field) {
    if (!fields.contains(name)) return;
    ++used;
    py::object v = fields[name];
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, double>) {
      // egress_rate_bytes_per_second=None is V0.1's "unlimited", the core's 0.
      field = v.is_none() ? 0.0 : v.cast<double>();
    } else if constexpr (std::is_same_v<T, std::uint64_t>) {
      // egress_quantum_bytes / egress_burst_bytes=None is V0.1's null, the core's 0.
      field = v.is_none() ? 0 : v.cast<T>();
    } else {
      field = v.cast<T>();
    }
  });
  // V0.1: a null burst is one quantum.
  if (c.egress_burst_bytes == 0) c.egress_burst_bytes = c.egress_quantum_bytes;
  if (used != fields.size()) {
    for (auto item : fields) {
      std::string key = py::str(item.first).cast<std::string>();
      bool known = false;
      for_each_field(c, [&](const char* name, auto&) { known = known || key == name; });
      if (!known) raise_error(ErrorCode::kInvalidArgument, "CommConfig has no field '" + key + "'");
    }
  }
  return c;
}

py::dict config_to_dict(const CommConfig& config) {
  py::dict out;
  CommConfig c = config;
  for_each_field(c, [&](const char* name, auto& field) { out[name] = field; });
  if (c.egress_rate_bytes_per_second == 0.0) out["egress_rate_bytes_per_second"] = py::none();
  if (c.egress_quantum_bytes == 0) out["egress_quantum_bytes"] = py::none();
  if (c.egress_burst_bytes == 0) out["egress_burst_bytes"] = py::none();
  out["cluster_key"] = py::bytes(c.cluster_key);
  return out;
}

// (node_id, host, port[, addresses[, transport]]): addresses are URL strings (wcomm/address.h).
Peer peer_from_tuple(const py::handle& peer) {
  auto t = py::reinterpret_borrow<py::tuple>(peer);
  Peer out{t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<std::uint16_t>()};
  if (t.size() > 3)
    for (py::handle a : t[3]) out.addresses.push_back(Address::parse(a.cast<std::string>(), /*allow_port_zero=*/true));
  if (t.size() > 4) out.transport = t[4].cast<std::string>();
  return out;
}

py::tuple peer_to_tuple(const Peer& peer) {
  py::list addresses;
  for (const Address& a : peer.addresses) addresses.append(a.to_string());
  return py::make_tuple(peer.node_id, peer.host, peer.port, py::tuple(addresses), peer.transport);
}

py::dict node_config_to_dict(const NodeConfig& config) {
  py::dict out;
  out["local"] = peer_to_tuple(config.local);
  out["bind_host"] = config.bind_host;
  py::list peers;
  for (const Peer& p : config.peers) peers.append(peer_to_tuple(p));
  out["peers"] = peers;
  out["comm"] = config_to_dict(config.comm);
  return out;
}

}  // namespace wcomm::python
