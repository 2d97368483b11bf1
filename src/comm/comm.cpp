// Comm's public API: validation and encoding on the caller's thread, everything stateful
// handed to the loop thread (docs/thread-model.md).
#include "wcomm/comm.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <stdexcept>

#include "comm/comm_impl.h"
#include "comm/same_host.h"
#include "transport/tls/tls_context.h"

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
  peers.clear();
  listeners.clear();
}

// TCP keepalive on the heartbeat's scale, for peers that do not heartbeat (V0.1): idle
// 3 intervals, then a probe each interval, dead after 3 unanswered (whole seconds, at least 1).
transport::Options Comm::Impl::transport_options() const {
  transport::Options o;
  o.tcp_nodelay = spec.comm.tcp_nodelay;
  o.tls = tls;
  o.tcp_notsent_lowat_bytes = static_cast<int>(spec.comm.tcp_notsent_lowat_bytes);
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

PeerState* Comm::Impl::find_peer(std::string_view node_id) const {
  auto found = peers.find(node_id);
  return found == peers.end() ? nullptr : found->second.get();
}

PeerState* Comm::Impl::find_peer(const Peer& peer) const {
  auto found = peers_by_address.find(&peer);
  return found != peers_by_address.end() ? found->second : find_peer(peer.node_id);
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
  for (auto& [name, peer] : peers) peer->session().close_all(error);
  scheduler->close();
  auto pending = std::move(handshaking);
  handshaking.clear();
  for (auto& c : pending) c->fail(error, true);
}

Comm::Comm(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

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

// Listens on every local address (bind_host in place of the V0.1 host, when given), and
// records where each listener is reached (ephemeral ports resolved) in the spec.
void listen(Comm::Impl& impl) {
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

}  // namespace

std::shared_ptr<Comm> Comm::create(CommSpec spec) {
  if (spec.comm.cluster_key.empty())
    if (const char* file = std::getenv("WCOMM_CLUSTER_KEY_FILE"); file && *file)
      spec.comm.cluster_key = read_cluster_key_file(file);
  spec.comm.validate();
  // spdlog's registry is made here, not by two loops at once; through a static of our own, so
  // that every later Comm (and its loop thread) visibly comes after it, for TSan too: spdlog's
  // own once-only initialisation is inside its (uninstrumented) library.
  static spdlog::logger* const logger = spdlog::default_logger_raw();
  (void)logger;
  if (spec.local.node_id.empty()) throw InvalidArgumentError("local node_id must not be empty");
  if (spec.bind_host.empty()) spec.bind_host = spec.local.host;
  auto impl = std::make_shared<Impl>(std::move(spec));
  for (const Peer& p : impl->spec.peers) {
    if (p.node_id.empty()) throw InvalidArgumentError("a peer's node_id must not be empty");
    if (p.endpoints().empty())
      throw InvalidArgumentError("peer '" + p.node_id + "' has no address (give host and port, or addresses)");
    if (impl->spec.comm.tls.enabled() && (p.transport == "shm" || p.transport == "unix" || p.transport == "ucx"))
      throw InvalidArgumentError("peer '" + p.node_id + "' has transport '" + p.transport +
                                 "', which would bypass TLS (comm.tls is set): use auto or tcp");
    if (dial_endpoints(p, impl->spec.comm).empty())
      throw InvalidArgumentError("peer '" + p.node_id + "' has no address for transport '" +
                                 transport_for(p, impl->spec.comm) + "' (it has " + p.endpoints_text() + ")");
    if (!p.host.empty() && p.port == 0)
      throw InvalidArgumentError("peer '" + p.node_id + "' has port 0; a remote peer needs the port it listens on");
    if (p.node_id == impl->spec.local.node_id)
      throw InvalidArgumentError("peer '" + p.node_id + "' has the local node's own node_id");
    if (!impl->peers.emplace(p.node_id, std::make_unique<PeerState>(*impl, p)).second)
      throw InvalidArgumentError("peer '" + p.node_id + "' is listed twice");
  }
  for (const auto& [name, state] : impl->peers) impl->peers_by_address.emplace(&state->peer(), state.get());
  if (impl->spec.comm.tls.enabled()) {
    for (const Address& a : impl->spec.local.endpoints())
      if (a.scheme != "tcp")
        throw InvalidArgumentError("the local address " + a.to_string() +
                                   " would bypass TLS (comm.tls is set): list only tcp addresses");
    impl->tls = transport::TlsContext::load(impl->spec.comm.tls);  // InvalidArgumentError naming the file
  }
  listen(*impl);
  impl->work.emplace(impl->io.get_executor());
  impl->self = impl;
  impl->poster = Impl::make_poster(impl);
  // The thread keeps the Impl alive while it runs: a Comm destroyed from its own callback
  // detaches the thread, which then drains the loop and lets go last.
  impl->thread = std::thread([keep = impl]() mutable {
    pthread_setname_np(pthread_self(), "wcomm-loop");  // as top -H and gdb show it
    // Held until this thread's last log line: a detached loop (see above) may outlive main(),
    // and letting go of the logger orders its last use before the logger's end at exit.
    const auto logger = spdlog::default_logger();
    keep->io.run();  // returns once close() has ended everything and no work is left
    {
      std::lock_guard lock(keep->post_mutex);
      keep->loop_finished = true;
    }
    keep->io.restart();
    keep->io.poll();  // what was posted before the flag went up
    keep.reset();     // (its end may log)
  });
  return std::shared_ptr<Comm>(new Comm(std::move(impl)));
}

Comm::~Comm() { close(); }

// Ends every connection and fails every pending operation (close_from_loop), then lets the
// loop run until nothing is left to do: handlers already posted (sends racing the close,
// completions, callbacks) all run. From a callback on the loop thread it cannot wait for
// the loop it runs on: it ends everything there and the loop drains after the callback.
void Comm::close() {
  if (impl_->closed.exchange(true)) return;
  if (impl_->thread.get_id() == std::this_thread::get_id()) {
    impl_->close_from_loop();
    impl_->work.reset();
    impl_->thread.detach();
    return;
  }
  std::promise<void> closed;
  asio::post(impl_->io, [this, &closed] {
    impl_->close_from_loop();
    closed.set_value();
  });
  closed.get_future().wait();
  impl_->work.reset();
  impl_->thread.join();
}

const Peer& Comm::local() const { return impl_->spec.local; }
std::vector<Address> Comm::addresses() const {
  std::vector<Address> out;
  for (const auto& listener : impl_->listeners) out.push_back(listener->address());
  return out;
}
std::uint16_t Comm::port() const { return impl_->spec.local.port; }

const Peer& Comm::peer(std::string_view node_id) const {
  if (PeerState* p = impl_->find_peer(node_id)) return p->peer();
  std::string known;
  for (const auto& [name, p] : impl_->peers) known += (known.empty() ? "" : ", ") + name;
  if (node_id == impl_->spec.local.node_id)
    throw std::out_of_range("'" + std::string(node_id) + "' is this node itself, not a peer (peers: " + known + ")");
  throw std::out_of_range("unknown peer '" + std::string(node_id) + "' (peers: " + known + ")");
}

std::vector<Peer> Comm::peers() const {
  std::vector<Peer> out;
  for (const Peer& p : impl_->spec.peers) out.push_back(p);
  return out;
}

namespace {
// A timeout that is not one (NaN, negative) is refused at the call; any other, however long,
// means what it says (deadline.h).
std::optional<Error> timeout_refused(const std::optional<Seconds>& timeout, const char* what) {
  if (!timeout) return std::nullopt;
  auto problem = timeout_problem(timeout->count());
  if (!problem) return std::nullopt;
  return Error{ErrorCode::kInvalidArgument, std::string(what) + ": CommOptions::timeout (" +
                                                seconds_text(timeout->count()) + " s) " + *problem};
}
}  // namespace

Future<SendResult> Comm::send(Value value, const Peer& peer, Value piggypayload, CommOptions options) {
  const SharedPoster& post = impl_->poster;
  PeerState* state = impl_->find_peer(peer);
  if (!state)
    return ready_future<SendResult>(Error{ErrorCode::kInvalidArgument, "unknown peer '" + peer.node_id + "'"}, post);
  if (auto refused = timeout_refused(options.timeout, "send")) return ready_future<SendResult>(*refused, post);
  if (impl_->closed.load()) return ready_future<SendResult>(Error{ErrorCode::kClosed, "the Comm is closed"}, post);

  const std::uint64_t id = impl_->next_message_id.fetch_add(1, std::memory_order_relaxed);
  EncodedFrame frame;
  {
    CodecOptions codec;
    codec.limits = &impl_->spec.comm;
    codec.registry = &impl_->registry;
    codec.retry_key = options.retry_key;
    std::shared_lock lock(impl_->codec_mutex);
    auto encoded = encode_data(value, piggypayload, options.tag, id, codec);
    if (!encoded) return ready_future<SendResult>(encoded.error(), post);
    frame = std::move(encoded).value();
  }
  if (frame.wire_bytes() > impl_->spec.comm.max_peer_queued_bytes)
    return ready_future<SendResult>(
        Error{ErrorCode::kMessageTooLarge, "message of " + std::to_string(frame.wire_bytes()) +
                                               " bytes can never fit the send queue (max_peer_queued_bytes=" +
                                               std::to_string(impl_->spec.comm.max_peer_queued_bytes) + ")"},
        post);
  Priority priority = options.priority;
  if (priority == Priority::kAuto) {
    // Small messages (control traffic) first; what would be chunked is bulk.
    const std::uint64_t small = impl_->spec.comm.chunk_bytes ? impl_->spec.comm.chunk_bytes : 256ull << 10;
    priority = frame.payload_bytes <= small ? Priority::kHigh : Priority::kBulk;
  }
  return state->outbox().send_from_caller(std::move(frame), id, priority, options);
}

namespace {

// What a Future asks of a send or recv on the loop (cancel, read): the loop does it if both
// the operation and the Comm are still there when it gets to it.
// (After close the operation has completed already: nothing is lost if the loop has gone.)
template <class Operation, class Fn>
void run_on_loop(const std::weak_ptr<Comm::Impl>& comm, std::weak_ptr<Operation> operation, Fn fn) {
  if (auto impl = comm.lock())
    impl->post([operation = std::move(operation), fn] {
      if (auto op = operation.lock()) fn(op);
    });
}

}  // namespace

void OutMessage::cancel() {
  run_on_loop(comm, weak_from_this(), [state = peer](const std::shared_ptr<OutMessage>& m) {
    state->outbox().cancel_send(m, Error{ErrorCode::kCancelled, "send was cancelled"});
  });
}

void RecvWaiter::cancel() {
  run_on_loop(comm, weak_from_this(), [state = peer](const std::shared_ptr<RecvWaiter>& w) {
    state->cancel_recv(w, Error{ErrorCode::kCancelled, "recv was cancelled"});
  });
}

void RecvWaiter::callback_set() {
  // A parked recv is read by the thread that waits for it, or by the loop; with a callback no
  // thread waits, and the loop may be standing down for another recv's reader.
  if (!peer->loop_stands_down()) return;
  run_on_loop(comm, weak_from_this(), [state = peer](const std::shared_ptr<RecvWaiter>&) { state->read_soon(); });
}

std::shared_ptr<RecvWaiter> RecvWaiter::make(const std::shared_ptr<Comm::Impl>& owner, PeerState* state,
                                             std::uint32_t tag, std::vector<Tensor> into) {
  auto waiter = std::make_shared<RecvWaiter>();
  waiter->tag = tag;
  waiter->into = std::move(into);
  waiter->promise.emplace(owner->poster, waiter);
  waiter->peer = state;
  waiter->comm = owner;
  return waiter;
}

void RecvWaiter::help(Clock::time_point deadline) {
  auto impl = comm.lock();   // keeps the Comm's insides there while this thread reads
  if (impl && !impl->closed.load()) peer->help_recv(shared_from_this(), deadline);
}

namespace {

// The checks every recv makes first: a known peer, a timeout, an open Comm.
Result<PeerState*> recv_peer(Comm::Impl& impl, const Peer& peer, const CommOptions& options) {
  PeerState* state = impl.find_peer(peer);
  if (!state) return Error{ErrorCode::kInvalidArgument, "unknown peer '" + peer.node_id + "'"};
  if (auto refused = timeout_refused(options.timeout, "recv")) return *refused;
  if (impl.closed.load()) return Error{ErrorCode::kClosed, "the Comm is closed"};
  return state;
}

Future<Received> submit_recv(const std::shared_ptr<Comm::Impl>& owner, const Peer& peer, std::vector<Tensor> into,
                             CommOptions options) {
  const Result<PeerState*> state = recv_peer(*owner, peer, options);
  if (!state) return ready_future<Received>(state.error(), owner->poster);
  auto waiter = RecvWaiter::make(owner, state.value(), options.tag, std::move(into));
  Future<Received> future = waiter->promise->future();
  state.value()->recv_from_caller(waiter, options.timeout);
  return future;
}

}  // namespace

Future<Received> Comm::recv(const Peer& peer, CommOptions options) {
  return submit_recv(impl_, peer, {}, options);
}

Future<Received> Comm::recv_for(const Peer& peer, Seconds wait, CommOptions options) {
  const Result<PeerState*> state = recv_peer(*impl_, peer, options);
  if (!state) return ready_future<Received>(state.error(), impl_->poster);
  const Clock::time_point wait_until = deadline_after(wait);  // (saturating: no overflow)
  Future<Received> future = state.value()->recv_for(options.tag, wait_until, options.timeout);
  // Where this thread could not read its message itself (the loop or another thread reads),
  // it still waits the rest of the time for it.
  if (!future.ready() && Clock::now() < wait_until) {
    if (wait_until == Clock::time_point::max()) future.wait();
    else future.wait_for(wait_until - Clock::now());
  }
  return future;
}

Future<Received> Comm::recv_into(const Peer& peer, std::vector<Tensor> into, CommOptions options) {
  if (into.empty())
    return ready_future<Received>(Error{ErrorCode::kInvalidArgument, "recv_into needs at least one tensor"},
                                  impl_->poster);
  return submit_recv(impl_, peer, std::move(into), options);
}

void Comm::drop_connections(const Peer& peer, const std::string& reason) {
  PeerState* state = impl_->find_peer(peer.node_id);
  if (!state) return;
  // Not posted once the loop has finished: Comm::close ended every connection already.
  impl_->post([state, reason] { state->session().drop_connections(Error{ErrorCode::kConnectionClosed, reason}); });
}

void Comm::register_record(const std::string& type_id, std::uint32_t version) {
  std::unique_lock lock(impl_->codec_mutex);
  impl_->registry.add(TypeRegistry::Kind::kRecord, type_id, version);
}

void Comm::register_custom(const std::string& type_id, std::uint32_t version) {
  std::unique_lock lock(impl_->codec_mutex);
  impl_->registry.add(TypeRegistry::Kind::kCustom, type_id, version);
}

void Comm::set_allocator(BufferAllocator allocator) {
  std::unique_lock lock(impl_->codec_mutex);
  impl_->allocator = std::move(allocator);
}

const char* peer_event_name(PeerEvent::Kind kind) {
  switch (kind) {
    case PeerEvent::Kind::kUp: return "up";
    case PeerEvent::Kind::kDown: return "down";
    case PeerEvent::Kind::kRestarted: return "restarted";
  }
  return "?";
}

void Comm::on_peer_event(std::function<void(const PeerEvent&)> handler) {
  if (impl_->thread.get_id() == std::this_thread::get_id()) {  // from a callback
    impl_->peer_event_handler = std::move(handler);
    return;
  }
  std::promise<void> set;
  if (!impl_->post([this, &set, handler = std::move(handler)]() mutable {
        impl_->peer_event_handler = std::move(handler);
        set.set_value();
      }))
    return;
  set.get_future().wait();
}

CommStats Comm::stats() const {
  const auto& s = impl_->stats;
  auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  CommStats out{get(s.messages_sent),        get(s.messages_received),    get(s.wire_bytes_sent),
                get(s.wire_bytes_received),  get(s.bytes_copied),         get(s.connections_dialed),
                get(s.connections_accepted), get(s.connections_rejected), get(s.messages_read_by_receivers),
                get(s.messages_read_busy_polling), get(s.errors_without_waiter)};
  out.duplicates_dropped = get(s.duplicates_dropped);
  out.messages_chunked = get(s.messages_chunked);
  out.chunks_sent = get(s.chunks_sent);
  out.compression_bytes_in = get(s.compression_bytes_in);
  out.compression_bytes_out = get(s.compression_bytes_out);
  out.compression_seconds = static_cast<double>(get(s.compression_nanoseconds)) * 1e-9;
  out.bytes_decompressed = get(s.bytes_decompressed);
  out.peers = peer_stats();
  return out;
}

std::map<std::string, PeerStats> Comm::peer_stats() const {
  std::map<std::string, PeerStats> out;
  for (const auto& [name, peer] : impl_->peers) out.emplace(name, peer->stats());
  return out;
}

}  // namespace wcomm
