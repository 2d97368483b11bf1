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

Comm::Comm(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

void check_peer(const Comm::Impl& impl, const Peer& p) {
  if (p.node_id.empty()) throw InvalidArgumentError("a peer's node_id must not be empty");
  if (p.endpoints().empty())
    throw InvalidArgumentError("peer '" + p.node_id + "' has no address (give host and port, or addresses)");
  if (impl.spec.comm.tls.enabled() && (p.transport == "shm" || p.transport == "unix" || p.transport == "ucx"))
    throw InvalidArgumentError("peer '" + p.node_id + "' has transport '" + p.transport +
                               "', which would bypass TLS (comm.tls is set): use auto or tcp");
  if (dial_endpoints(p, impl.spec.comm).empty())
    throw InvalidArgumentError("peer '" + p.node_id + "' has no address for transport '" +
                               transport_for(p, impl.spec.comm) + "' (it has " + p.endpoints_text() + ")");
  if (!p.host.empty() && p.port == 0)
    throw InvalidArgumentError("peer '" + p.node_id + "' has port 0; a remote peer needs the port it listens on");
  if (p.node_id == impl.spec.local.node_id)
    throw InvalidArgumentError("peer '" + p.node_id + "' has the local node's own node_id");
}

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
  check_join_policy(spec);
  auto impl = std::make_shared<Impl>(std::move(spec));
  for (const Peer& p : impl->spec.peers) {
    check_peer(*impl, p);
    if (!impl->peers.add(std::make_unique<PeerState>(*impl, p)))
      throw InvalidArgumentError("peer '" + p.node_id + "' is listed twice");
  }
  if (impl->spec.comm.tls.enabled()) {
    for (const Address& a : impl->spec.local.endpoints())
      if (a.scheme != "tcp")
        throw InvalidArgumentError("the local address " + a.to_string() +
                                   " would bypass TLS (comm.tls is set): list only tcp addresses");
    impl->tls = transport::TlsContext::load(impl->spec.comm.tls);  // InvalidArgumentError naming the file
  }
  listen_on_local_addresses(*impl);
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
  for (PeerState* p : impl_->peers.current()) known += (known.empty() ? "" : ", ") + p->peer().node_id;
  if (node_id == impl_->spec.local.node_id)
    throw std::out_of_range("'" + std::string(node_id) + "' is this node itself, not a peer (peers: " + known + ")");
  throw std::out_of_range("unknown peer '" + std::string(node_id) + "' (peers: " + known + ")");
}

std::vector<Peer> Comm::peers() const {
  std::vector<Peer> out;
  for (PeerState* p : impl_->peers.current()) out.push_back(p->peer());
  return out;
}

const Peer& Comm::add_peer(Peer peer) {
  if (impl_->closed.load()) throw ClosedError("add_peer: the Comm is closed");
  check_peer(*impl_, peer);
  const std::string node_id = peer.node_id;
  auto state = std::make_unique<PeerState>(*impl_, std::move(peer));
  const Peer& added = state->peer();
  // (Refused, the state is dropped with `added`: the message names node_id, a copy.)
  if (!impl_->peers.add(std::move(state)))
    throw InvalidArgumentError("add_peer: peer '" + node_id + "' is there already (remove_peer it first)");
  impl_->post([impl = impl_.get(), node_id] { impl->report(PeerEvent{node_id, PeerEvent::Kind::kJoined, "added"}); });
  return added;
}

bool Comm::remove_peer(std::string_view node_id, const std::string& reason) {
  PeerState* state = impl_->peers.remove(node_id);
  if (!state) return false;
  const Error why{ErrorCode::kClosed, "peer '" + std::string(node_id) + "' was removed" +
                                          (reason.empty() ? std::string() : ": " + reason)};
  // Its pending sends and recvs fail, its connections end (the peer sees them lost). Not
  // posted once the loop has finished: Comm::close ended everything already.
  impl_->post([state, why] { state->session().close_all(why); });
  return true;
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
  if (options.compress == Compression::kOn && !compression_built())
    return ready_future<SendResult>(Error{ErrorCode::kInvalidArgument, kNoCompressionReason}, post);

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
    case PeerEvent::Kind::kJoined: return "joined";
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

std::uint64_t Comm::watch_peer_events(std::function<void(const PeerEvent&)> handler) {
  std::lock_guard lock(impl_->watchers_mutex);
  const std::uint64_t id = impl_->next_watcher++;
  impl_->peer_watchers.emplace_back(id, std::move(handler));
  return id;
}

void Comm::unwatch_peer_events(std::uint64_t id) {
  std::lock_guard lock(impl_->watchers_mutex);
  std::erase_if(impl_->peer_watchers, [id](const auto& w) { return w.first == id; });
}

void Comm::Impl::report(const PeerEvent& event) {
  if (peer_event_handler) peer_event_handler(event);
  std::vector<std::function<void(const PeerEvent&)>> watchers;
  {
    std::lock_guard lock(watchers_mutex);  // copied: no handler runs under a wcomm lock
    for (const auto& w : peer_watchers) watchers.push_back(w.second);
  }
  for (const auto& handler : watchers) handler(event);
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
  for (PeerState* peer : impl_->peers.current()) out.emplace(peer->peer().node_id, peer->stats());
  return out;
}

}  // namespace wcomm
