// Comm::Impl: the Comm's state on its loop thread: accepted connections and the bounds on
// their handshakes, listening on the local addresses, and close (comm_impl.h).
#include "comm/comm_impl.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "comm/same_host.h"

namespace wcomm {

Error timeout_error(const char* what, const Peer& peer, Seconds timeout) {
  return {ErrorCode::kOperationTimeout, std::string(what) + " to/from '" + peer.node_id + "' timed out after " +
                                            seconds_text(timeout.count()) + " s"};
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

Comm::Impl::Impl(CommSpec s) : spec(std::move(s)) {
  const CommConfig& c = spec.comm;
  scheduler.emplace(io, EgressScheduler::Settings{c.egress_quantum_bytes, c.egress_rate_bytes_per_second,
                                                  c.egress_burst_bytes, c.egress_max_bulk_flows});
}

Comm::Impl::~Impl() {
  // Sockets go before the io_context that owns their services.
  handshaking.clear();
  peers.destroy_all();
  listeners.clear();
}

// TCP keepalive on the heartbeat's scale, for peers that do not heartbeat (V0.1): idle
// 3 intervals, then a probe each interval, dead after 3 unanswered (whole seconds, at least 1).
transport::Options Comm::Impl::transport_options() const {
  transport::Options o;
  o.tcp_nodelay = spec.comm.tcp_nodelay;
  o.tls = tls;
  o.tcp_notsent_lowat_bytes = static_cast<int>(spec.comm.tcp_notsent_lowat_bytes);
  o.tcp_max_pacing_rate_bytes_per_second = static_cast<std::uint32_t>(spec.comm.tcp_max_pacing_rate_bytes_per_second);
  o.tcp_target_queue_delay = std::chrono::microseconds(spec.comm.tcp_target_queue_delay_us);
  const double hb = spec.comm.heartbeat_interval_s;
  if (hb > 0) {
    o.keepalive_idle_s = std::max(1, static_cast<int>(std::ceil(3 * hb)));
    o.keepalive_interval_s = std::max(1, static_cast<int>(std::ceil(hb)));
  }
  return o;
}

bool Comm::Impl::post(std::function<void()> fn) {
  std::lock_guard lock(post_mutex);
  if (loop_finished) return false;
  asio::post(io, std::move(fn));
  return true;
}

void Comm::Impl::let_go(std::shared_ptr<Connection>&& connection) {
  if (!connection || connection.use_count() != 1) return connection.reset();
  // (A finished loop does not take it: it is dropped here, with nothing beside.)
  post([last = std::move(connection)] {});
}

SharedPoster Comm::Impl::make_poster(std::weak_ptr<Impl> self) {
  return std::make_shared<const Poster>([weak = std::move(self)](std::function<void()> fn) {
    auto impl = weak.lock();
    if (!impl || !impl->post(fn)) std::thread(std::move(fn)).detach();
  });
}

namespace {

// The host a connection comes from, for the per-source bound; one source for same-host
// transports.
std::string source_of(const Connection& connection) {
  std::string host = connection.peer_host();
  return host.empty() ? "this host" : host;
}

}  // namespace

void Comm::Impl::on_accepted(std::unique_ptr<transport::Connection> stream) {
  auto connection = std::make_shared<Connection>(*this, std::move(stream));
  evict_from_source(source_of(*connection));
  evict_oldest_handshakes();
  handshaking.insert(connection);
  handshake_order.push_back(connection);
  const auto deadline = deadline_of(Seconds(spec.comm.handshake_timeout_s));
  connection->handshake_as_acceptor(deadline, [this, connection](std::optional<Error> error) {
    handshaking.erase(connection);
    if (error) {
      stats.connections_rejected.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    stats.connections_accepted.fetch_add(1, std::memory_order_relaxed);
    connection->peer()->session().add_connection(connection);
  });
}

// At max_pending_handshakes_per_source from one source, that source's oldest goes: a flood from
// one host then cannot evict another host's handshakes (the total bound below still holds).
void Comm::Impl::evict_from_source(const std::string& source) {
  std::shared_ptr<Connection> oldest;
  std::uint64_t pending = 0;
  for (const auto& weak : handshake_order) {
    auto c = weak.lock();
    if (!c || !handshaking.count(c) || source_of(*c) != source) continue;
    if (!oldest) oldest = c;
    ++pending;
  }
  if (pending < spec.comm.max_pending_handshakes_per_source || !oldest) return;
  ++handshakes_evicted;
  oldest->fail({ErrorCode::kConnectionFailed, "dropped: " + std::to_string(pending) + " connections from " + source +
                                                  " were waiting for their handshake (max_pending_handshakes_per_source)"},
               true);
}

// At max_pending_handshakes, the connection that has waited longest for its handshake goes:
// idle or hostile sockets then cannot keep a real peer, which completes its handshake at
// once, from getting in. Logged at most every 10 s.
void Comm::Impl::evict_oldest_handshakes() {
  while (handshaking.size() >= spec.comm.max_pending_handshakes && !handshake_order.empty()) {
    auto oldest = handshake_order.front().lock();
    handshake_order.pop_front();
    if (!oldest || !handshaking.count(oldest)) continue;
    ++handshakes_evicted;
    oldest->fail({ErrorCode::kConnectionFailed, "dropped: " + std::to_string(spec.comm.max_pending_handshakes) +
                                                    " connections were waiting for their handshake (max_pending_handshakes)"},
                 true);
  }
  // Connections whose handshake ended (either way) leave the front, so the queue stays short.
  while (!handshake_order.empty()) {
    auto front = handshake_order.front().lock();
    if (front && handshaking.count(front)) break;
    handshake_order.pop_front();
  }
  const auto now = Clock::now();
  if (handshakes_evicted > 0 && now - last_eviction_log > std::chrono::seconds(10)) {
    spdlog::warn("wcomm[{}]: {} connection(s) dropped before their handshake: more than max_pending_handshakes ({}) "
                 "were waiting (idle or hostile sockets?)",
                 spec.local.node_id, handshakes_evicted, spec.comm.max_pending_handshakes);
    handshakes_evicted = 0;
    last_eviction_log = now;
  }
}

void Comm::Impl::close_from_loop() {
  for (auto& listener : listeners) listener->close();
  if (same_host_listener) same_host_listener->close();
  Error error{ErrorCode::kClosed, "the Comm was closed"};
  for (PeerState* peer : peers.all()) peer->session().close_all(error);
  scheduler->close();
  auto pending = std::move(handshaking);
  handshaking.clear();
  for (auto& c : pending) c->fail(error, true);
}

namespace {

void accept_on(Comm::Impl& impl, transport::Listener& listener) {
  listener.start([raw = &impl](std::error_code ec, std::unique_ptr<transport::Connection> stream) {
    if (ec) return;  // the listener logged it and backs off
    raw->on_accepted(std::move(stream));
  });
}

// Peers on this host reach the node through shared memory (auto, shm) or a Unix socket (unix)
// at a name derived from its node_id and TCP host:port (same_host.h). With auto, a node that
// cannot listen there is still reached over its other addresses.
void listen_same_host(Comm::Impl& impl) {
  const std::string& transport = impl.spec.comm.transport;
  if (transport == "tcp" || transport == "ucx" || impl.spec.comm.tls.enabled()) return;  // TLS: no same-host bypass
  auto address = same_host_address(impl.spec.local, transport == "auto" ? "shm" : transport);
  if (!address) return;
  try {
    impl.same_host_listener = transport::listen(impl.io, *address, impl.transport_options());
  } catch (const ConnectionFailedError& e) {
    if (transport != "auto") throw;
    spdlog::warn("wcomm[{}]: peers on this host will use tcp: {}", impl.spec.local.node_id, e.what());
    return;
  }
  accept_on(impl, *impl.same_host_listener);
}

}  // namespace

void listen_on_local_addresses(Comm::Impl& impl) {
  Peer& local = impl.spec.local;
  // The same-host name first when the port is known: a peer on this host that dials while
  // this node starts then never finds TCP listening before shared memory.
  const bool same_host_first = local.port != 0;
  if (same_host_first) listen_same_host(impl);
  // For the same reason the node's own same-host addresses (unix, shm: a rendezvous lists one
  // for each rank on this host) listen before its TCP ones: a peer dialing them in order
  // never finds TCP up but its same-host address refused, and settles on TCP.
  const std::vector<Address> endpoints = local.endpoints();
  std::vector<std::size_t> order(endpoints.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](std::size_t i) { return endpoints[i].scheme != "tcp"; });
  std::vector<Address> bound(endpoints.size());
  std::vector<std::decay_t<decltype(impl.listeners.front())>> made(endpoints.size());
  for (std::size_t i : order) {
    Address address = endpoints[i];
    if (address.scheme == "tcp" && address.host == local.host && !impl.spec.bind_host.empty())
      address.host = impl.spec.bind_host;
    auto listener = transport::listen(impl.io, address, impl.transport_options());
    Address reached = listener->address();
    if (reached.scheme == "tcp") {
      if (local.port == 0 || local.port == address.port) local.port = reached.port;
      if (address.host == impl.spec.bind_host && !local.host.empty()) reached.host = local.host;
    }
    bound[i] = reached;
    accept_on(impl, *listener);
    made[i] = std::move(listener);
  }
  for (auto& listener : made) impl.listeners.push_back(std::move(listener));  // in the directory's order
  if (!local.addresses.empty()) local.addresses = std::move(bound);
  if (!same_host_first) listen_same_host(impl);  // named after the port just bound
}

}  // namespace wcomm
