// PeerState: one peer's bounded FIFO send queue and writer, its dialing with backoff, and its
// connections. Loop thread, except the send fast path. The receive side is peer_receive.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <cstring>

#include "comm/comm_impl.h"
#include "comm/same_host.h"

namespace wcomm {
Error timeout_error(const char* what, const Peer& peer, Seconds timeout) {
  return {ErrorCode::kOperationTimeout, std::string(what) + " to/from '" + peer.node_id + "' timed out after " +
                                            seconds_text(timeout.count()) + " s"};
}

namespace {
// The frame's payload segments (empty ones left out), after what buffers holds.
void append_segments(const EncodedFrame& frame, std::vector<asio::const_buffer>& buffers) {
  for (const Buffer& b : frame.segments)
    if (b.size()) buffers.emplace_back(b.data(), b.size());
}

// The whole frame: head, then payload.
void gather_frame(const EncodedFrame& frame, std::vector<asio::const_buffer>& buffers) {
  buffers.clear();
  buffers.reserve(1 + frame.segments.size());
  buffers.emplace_back(frame.head.data(), frame.head.size());
  append_segments(frame, buffers);
}
}  // namespace

std::vector<asio::const_buffer> OutMessage::payload_gather() const {
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(frame.segments.size());
  append_segments(frame, buffers);
  return buffers;
}

// ---- send side -------------------------------------------------------------------------

PeerState::PeerState(Comm::Impl& impl, Peer peer)
    : impl_(impl), peer_(std::move(peer)), inbox_(impl.spec.comm) {
  endpoints_ = dial_endpoints(peer_, impl.spec.comm);
  if (!endpoints_.empty()) {
    const auto same_host = same_host_address(peer_, endpoints_.front().scheme);
    same_host_first_ = same_host && endpoints_.size() > 1 && same_host->abstract == endpoints_.front().abstract &&
                       same_host->path == endpoints_.front().path;
  }
}

PeerStats PeerState::stats() const {
  std::lock_guard lock(stats_mutex_);
  if (!stats_connection_) return {};
  return {true, std::string(stats_connection_->traits().name), std::string(stats_connection_->payload_path())};
}

void PeerState::refresh_stats() {
  std::shared_ptr<Connection> current;
  Connection* send = send_connection();
  for (const auto& c : connections_)
    if (c.get() == send) current = c;
  // (An acceptor's connection that the peer has not confirmed yet, peer_holds_it, is still the
  // one it reaches the peer by.)
  if (!current && !connections_.empty()) current = connections_.front();
  std::lock_guard lock(stats_mutex_);
  stats_connection_ = std::move(current);
}

bool PeerState::has_capacity_for(std::uint64_t bytes) const {
  const CommConfig& c = impl_.spec.comm;
  return queued_messages_ + 1 <= c.max_peer_queued_messages && queued_bytes_ + bytes <= c.max_peer_queued_bytes;
}

std::vector<asio::const_buffer> OutMessage::gather() const {
  std::vector<asio::const_buffer> buffers;
  gather_frame(frame, buffers);
  return buffers;
}

Future<SendResult> PeerState::send_from_caller(EncodedFrame frame, std::uint64_t id, Priority priority,
                                               const CommOptions& options) {
  std::unique_lock lock(inline_mutex_);
  // (A send that wants an ACK, or has a retry key, goes through the loop, which knows whether
  // the peer takes them; one that would be chunked too: once started here, it would have to
  // be written whole.)
  const std::uint64_t chunk = impl_.spec.comm.chunk_bytes;
  std::uint64_t written = 0;
  std::shared_ptr<Connection> written_to;
  if (inline_connection_ && posted_sends_ == 0 && !options.ack && !options.retry_key &&
      (chunk == 0 || frame.payload_bytes <= chunk)) {
    std::error_code ec;
    inline_connection_->mark_used();  // (already used, or the first ever: refresh_inline)
    wrote_data_.store(true, std::memory_order_relaxed);
    thread_local std::vector<asio::const_buffer> buffers;  // (reused: no allocation per message)
    gather_frame(frame, buffers);
    written = inline_connection_->try_write(buffers, ec);
    if (written == frame.wire_bytes()) {
      // Sent whole: no OutMessage, no operation behind the Future (nothing left to cancel).
      lock.unlock();
      impl_.stats.messages_sent.fetch_add(1, std::memory_order_relaxed);
      impl_.stats.wire_bytes_sent.fetch_add(written, std::memory_order_relaxed);
      return ready_future<SendResult>(SendResult{id, written}, impl_.poster);
    }
    if (written > 0) written_to = inline_connection_;  // the rest of this frame must follow on it, first
    inline_connection_.reset();
  }
  auto message = std::make_shared<OutMessage>();
  message->id = id;
  message->tag = options.tag;
  message->frame = std::move(frame);
  message->promise = Promise<SendResult>(impl_.poster, message);
  message->wants_ack = options.ack;
  message->compress = options.compress;
  message->priority = priority;
  message->peer = this;
  message->comm = impl_.self;
  message->written_inline = written;
  message->inline_connection = std::move(written_to);
  Future<SendResult> future = message->promise.future();
  // Posted under the mutex, so messages reach the loop in call order.
  const bool posted = impl_.post([this, message, options] {
    submit_send(message, options);
    {
      std::lock_guard guard(inline_mutex_);
      posted_sends_ -= 1;
    }
    refresh_inline();
  });
  if (posted) posted_sends_ += 1;
  else message->promise.complete(Error{ErrorCode::kClosed, "the Comm is closed"});
  return future;
}

void PeerState::disable_inline() {
  std::lock_guard lock(inline_mutex_);  // waits out a caller's write in progress
  inline_connection_.reset();
}

void PeerState::refresh_inline() {
  std::shared_ptr<Connection> idle_connection;
  Connection* send = send_connection();
  const bool scheduled = impl_.scheduler && impl_.scheduler->enabled();
  if (!closing() && !active_ && queue_.empty() && streaming_.empty() && capacity_waiters_.empty() && !scheduled &&
      send && !send->writing() && (send->used() || !wrote_data_.load(std::memory_order_relaxed))) {  // (a first frame there may need its flag)
    for (const auto& c : connections_)
      if (c.get() == send) idle_connection = c;
  }
  std::lock_guard lock(inline_mutex_);
  inline_connection_ = posted_sends_ == 0 ? std::move(idle_connection) : nullptr;
}

void PeerState::continue_inline_write(const std::shared_ptr<OutMessage>& message) {
  auto connection = std::move(message->inline_connection);
  message->state = OutMessage::State::kActive;
  queued_messages_ += 1;
  queued_bytes_ += message->bytes();
  bool alive = std::find(connections_.begin(), connections_.end(), connection) != connections_.end();
  if (active_ || !alive) {
    // The partial frame's connection is gone (or busy, which the idle rule excludes).
    active_ = message;
    active_connection_ = nullptr;
    return finish_active(asio::error::connection_reset);
  }
  active_ = message;
  active_connection_ = connection.get();
  auto unit = std::make_shared<Unit>();
  unit->message = message;
  unit->started = Clock::now();
  unit->total = message->bytes() - message->written_inline;
  unit->buffers = slice_buffers(message->gather(), message->written_inline, unit->total);
  unit->handed_over_base = connection->bytes_handed_over();
  unit_ = unit;
  connection->write(unit->buffers, [this, unit](std::error_code ec) {
    if (unit_ == unit) finish_active(ec);
  });
}

void PeerState::submit_send(std::shared_ptr<OutMessage> message, const CommOptions& options) {
  disable_inline();  // the loop may write from here on
  if (closing()) {
    message->promise.complete(Error{ErrorCode::kClosed, "the Comm is closed"});
    return;
  }
  if (options.timeout) {
    message->timer.emplace(impl_.io, deadline_of(options.timeout));
    message->timer->async_wait([this, weak = std::weak_ptr(message), timeout = *options.timeout](std::error_code ec) {
      auto m = weak.lock();
      if (!ec && m) cancel_send(m, timeout_error("send", peer_, timeout));
    });
  }
  if (message->written_inline > 0) return continue_inline_write(message);
  if (has_capacity_for(message->bytes()) && (capacity_waiters_.empty() || may_pass_capacity_waiters(*message)))
    return admit(message);
  if (!options.wait_for_capacity) {
    const CommConfig& c = impl_.spec.comm;
    message->promise.complete(Error{
        ErrorCode::kBackpressure,
        "send queue to '" + peer_.node_id + "' is full (" + std::to_string(queued_messages_) + " messages, " +
            std::to_string(queued_bytes_) + " bytes queued; limits max_peer_queued_messages=" +
            std::to_string(c.max_peer_queued_messages) + ", max_peer_queued_bytes=" +
            std::to_string(c.max_peer_queued_bytes) + "); retry later or send with wait_for_capacity"});
    message->timer.reset();
    return;
  }
  message->state = OutMessage::State::kWaitingForCapacity;
  capacity_waiters_.push_back(std::move(message));
}

// An urgent message that fits does not wait behind bulk waiting for queue capacity (a ping
// behind a second 64 MiB tensor would), unless one of them is on its tag (per-tag order).
bool PeerState::may_pass_capacity_waiters(const OutMessage& message) const {
  if (message.priority != Priority::kHigh) return false;
  return std::none_of(capacity_waiters_.begin(), capacity_waiters_.end(), [&](const auto& w) {
    return w->state != OutMessage::State::kDone && w->tag == message.tag;
  });
}

void PeerState::admit(const std::shared_ptr<OutMessage>& message) {
  message->state = OutMessage::State::kQueued;
  queued_messages_ += 1;
  queued_bytes_ += message->bytes();
  queue_.push_back(message);
  ensure_connection();
  pump();
}

void PeerState::admit_waiting() {
  while (!capacity_waiters_.empty()) {
    auto& next = capacity_waiters_.front();
    if (next->state == OutMessage::State::kDone) {
      capacity_waiters_.pop_front();
      continue;
    }
    if (!has_capacity_for(next->bytes())) return;
    auto message = std::move(next);
    capacity_waiters_.pop_front();
    admit(message);
  }
}

void PeerState::release(OutMessage& message) {
  queued_messages_ -= 1;
  queued_bytes_ -= message.bytes();
}

void PeerState::cancel_send(const std::shared_ptr<OutMessage>& message, Error error) {
  switch (message->state) {
    case OutMessage::State::kDone:
      return;
    case OutMessage::State::kWaitingForCapacity:
      message->state = OutMessage::State::kDone;  // skipped lazily by admit_waiting
      break;
    case OutMessage::State::kQueued:
      message->state = OutMessage::State::kDone;  // skipped lazily by pump
      release(*message);
      break;
    case OutMessage::State::kAwaitingAck:
      // Written already: only its wait for the ACK ends; the connection goes on. Whether the
      // peer read it is not known.
      message->state = OutMessage::State::kDone;
      awaiting_ack_.erase(message->id);
      message->timer.reset();
      message->promise.complete(delivery_unknown("its wait ended (" + error.message + ")"));
      return;
    case OutMessage::State::kActive:
      // Its last byte is out already: delivered; the write's completion is on its way.
      if (went_out_whole(*message)) return;
      // A partial frame cannot be resumed: drop the connection. Once the stream is closed
      // (right here, on the loop) nothing touches the message's memory again.
      // Whatever else waited on that connection (sends awaiting their ACK) is told why.
      message->abort_error = error;
      if (Connection* c = active_ == message && active_connection_ ? active_connection_ : message->stream_connection)
        c->fail({ErrorCode::kConnectionClosed,
                                  "the connection was ended to abandon a partly written frame (" + error.message + ")"},
                                 /*local=*/true);
      return;  // finish_active completes it
  }
  message->timer.reset();
  message->frame.segments.clear();
  message->promise.complete(std::move(error));
  admit_waiting();
}

Connection* PeerState::send_connection() const {
  // Both sides send on the connection with the smallest connection_id (wire-v1.md), so
  // simultaneous dials converge on one connection; but once messages went out on one, they
  // stay on it while it lives: frames on two connections may be read in either order.
  Connection* best = nullptr;
  Connection* used = nullptr;
  for (const auto& c : connections_) {
    if (!c->peer_holds_it()) continue;  // (see there)
    if (c->used() && (!used || c->connection_id() < used->connection_id())) used = c.get();
    if (!best || c->connection_id() < best->connection_id()) best = c.get();
  }
  return used ? used : best;
}

void PeerState::pump() {
  for (const auto& c : connections_)
    if (c->has_pending_acks() && !c->writing() && active_connection_ != c.get()) write_acks(*c);
  pump_queue();
  refresh_inline();
}

// ---- acknowledgements (CommOptions::ack, "ack" feature) -----------------------------------

void PeerState::queue_ack(const std::shared_ptr<Connection>& connection, std::uint64_t message_id) {
  if (closing() || std::find(connections_.begin(), connections_.end(), connection) == connections_.end()) return;
  connection->queue_ack(message_id);
  pump();
}

// One ACK frame for every acknowledgement queued on the connection, written between frames.
void PeerState::write_acks(Connection& connection) {
  {
    std::lock_guard lock(inline_mutex_);  // waits out a caller's inline write
    if (posted_sends_ > 0) return;        // a caller's partial frame may be on its way: after it
    inline_connection_.reset();
  }
  Control control;
  control.acks = connection.take_pending_acks();
  auto frame = std::make_shared<std::vector<std::uint8_t>>(encode_control(FrameKind::kAck, control));
  connection.write({asio::buffer(*frame)}, [frame](std::error_code) {});  // its completion pumps
}

void PeerState::on_acks(const std::vector<std::uint64_t>& message_ids) {
  for (std::uint64_t id : message_ids) {
    auto found = awaiting_ack_.find(id);
    if (found == awaiting_ack_.end()) {
      if (active_ && active_->id == id) active_->acked_early = true;  // its write completion is still to run
      continue;  // else timed out or cancelled meanwhile
    }
    auto message = std::move(found->second);
    awaiting_ack_.erase(found);
    message->state = OutMessage::State::kDone;
    message->timer.reset();
    impl_.stats.messages_sent.fetch_add(1, std::memory_order_relaxed);
    impl_.stats.wire_bytes_sent.fetch_add(message->acked_wire_bytes, std::memory_order_relaxed);
    message->promise.complete(SendResult{message->id, message->acked_wire_bytes});
  }
}

Error PeerState::delivery_unknown(const std::string& why) const {
  return {ErrorCode::kDeliveryUnknown, "sent to '" + peer_.node_id + "' whole, but " + why +
                                           " before it acknowledged the message: the peer may have it"};
}

void PeerState::fail_awaiting_acks(Connection* connection, const std::string& why) {
  const Error error = delivery_unknown(why);
  std::vector<std::shared_ptr<OutMessage>> failed;
  for (auto it = awaiting_ack_.begin(); it != awaiting_ack_.end();) {
    if (connection && it->second->ack_connection != connection) {
      ++it;
      continue;
    }
    failed.push_back(std::move(it->second));
    it = awaiting_ack_.erase(it);
  }
  for (auto& m : failed) {
    m->state = OutMessage::State::kDone;
    m->timer.reset();
    m->promise.complete(error);
  }
}

void PeerState::fail_sends(const Error& error) {
  auto fail_all = [&](std::deque<std::shared_ptr<OutMessage>>& q, bool counted) {
    for (auto& m : q) {
      if (m->state == OutMessage::State::kDone) continue;
      if (counted) release(*m);
      m->state = OutMessage::State::kDone;
      m->timer.reset();
      m->frame.segments.clear();
      m->promise.complete(error);
    }
    q.clear();
  };
  fail_all(queue_, true);
  fail_all(capacity_waiters_, false);
}

// ---- connections -----------------------------------------------------------------------

void PeerState::ensure_connection() {
  if (!connections_.empty() || dialing_ || closing()) return;
  dialing_ = true;
  refused_since_.reset();
  dial(deadline_of(Seconds(impl_.spec.comm.connect_timeout_s)),
       std::chrono::duration_cast<std::chrono::milliseconds>(Seconds(impl_.spec.comm.reconnect_backoff_initial_s)), 0);
}

namespace {
// A peer that refuses connections (nothing listens there) is given this long, with quick
// retries, to start listening: the peers of one job may start in any order, but a node that
// is not running is reported about as fast as V0.1 did, not after connect_timeout_s.
constexpr auto kRefusedFor = std::chrono::seconds(2);
bool refused(std::error_code ec) {
  return ec == asio::error::connection_refused || ec == std::errc::no_such_file_or_directory;
}
}  // namespace

// One deadline for the whole dial: connecting (each address in turn) and the handshake.
void PeerState::dial(Clock::time_point deadline, std::chrono::milliseconds backoff, std::size_t address_index) {
  const Address& address = endpoints_[address_index];
  if (address_index == 0) same_host_refused_ = false;
  pending_dial_ = transport::dial(
      impl_.io, address, deadline, impl_.transport_options(),
      [this, deadline, backoff, address_index](std::error_code ec, std::unique_ptr<transport::Connection> stream) {
        pending_dial_.reset();
        if (closing()) return;
        if (ec) return retry_or_give_up(deadline, backoff, address_index, ec, ec.message());
        if (address_index > 0 && same_host_refused_)
          return look_again_at_same_host(deadline, backoff, address_index, std::move(stream));
        handshake(std::move(stream), deadline, backoff, address_index);
      });
}

// The same-host name was refused a moment ago, and another address of the peer answers now:
// the peer may have just started (a node listens at its same-host name before its TCP
// address). One more look there, so that two nodes on one host that start together do not
// settle on TCP for good; a peer on another host costs one refused connect.
void PeerState::look_again_at_same_host(Clock::time_point deadline, std::chrono::milliseconds backoff,
                                        std::size_t address_index, std::unique_ptr<transport::Connection> other) {
  same_host_refused_ = false;
  auto held = std::make_shared<std::unique_ptr<transport::Connection>>(std::move(other));  // (a handler is copyable)
  pending_dial_ = transport::dial(
      impl_.io, endpoints_.front(), deadline, impl_.transport_options(),
      [this, deadline, backoff, address_index, held](std::error_code ec, std::unique_ptr<transport::Connection> stream) {
        pending_dial_.reset();
        if (closing()) return;
        if (ec) return handshake(std::move(*held), deadline, backoff, address_index);
        held->reset();  // the peer sees it end before any HELLO
        handshake(std::move(stream), deadline, backoff, 0);
      });
}

void PeerState::handshake(std::unique_ptr<transport::Connection> stream, Clock::time_point deadline,
                          std::chrono::milliseconds backoff, std::size_t address_index) {
  auto connection = std::make_shared<Connection>(impl_, std::move(stream));
  impl_.handshaking.insert(connection);
  connection->handshake_as_dialer(
      *this, deadline, [this, connection, deadline, backoff, address_index](std::optional<Error> error) {
        impl_.handshaking.erase(connection);
        if (closing()) return;
        // Keys that do not match will not match on a retry: the sends fail now.
        if (error && connection->auth_refused()) {
          dialing_ = false;
          if (connections_.empty()) fail_sends({ErrorCode::kConnectionFailed, error->message});
          return;
        }
        if (error) return retry_or_give_up(deadline, backoff, address_index, {}, error->message);
        dialing_ = false;
        impl_.stats.connections_dialed.fetch_add(1, std::memory_order_relaxed);
        add_connection(connection);
      });
}

void PeerState::retry_or_give_up(Clock::time_point deadline, std::chrono::milliseconds backoff,
                                 std::size_t address_index, std::error_code ec, const std::string& why) {
  // With auto, the same-host name is tried first, unknown to the user: name the peer's own.
  const std::string where = transport_for(peer_, impl_.spec.comm) == "auto" ? peer_.endpoints_text()
                                                                           : endpoints_[address_index].to_string();
  // The next address of the peer, at once; after the last, back to the first after a pause.
  const std::size_t next = (address_index + 1) % endpoints_.size();
  const auto now = Clock::now();
  if (address_index == 0 && same_host_first_ && refused(ec)) same_host_refused_ = true;
  if (!refused(ec)) refused_since_.reset();
  else if (!refused_since_) refused_since_ = now;
  const bool nothing_to_send = queue_.empty() && capacity_waiters_.empty();
  // After the last address, a pause with jitter (0.75 to 1.25 of the backoff), so that peers
  // that lost each other at the same moment do not redial in lockstep.
  thread_local std::mt19937 jitter{std::random_device{}()};
  const auto pause = next == 0 ? std::chrono::milliseconds(std::max<std::int64_t>(
                                     1, std::int64_t(double(backoff.count()) *
                                                     std::uniform_real_distribution<double>(0.75, 1.25)(jitter))))
                               : std::chrono::milliseconds(0);
  std::string failure;
  if (now + pause >= deadline || ec == asio::error::timed_out)
    failure = "could not connect to '" + peer_.node_id + "' at " + where + " within " +
              seconds_text(impl_.spec.comm.connect_timeout_s) + " s (connect_timeout_s): " + why;
  else if (refused_since_ && now - *refused_since_ >= kRefusedFor)
    failure = "could not connect to '" + peer_.node_id + "' at " + where + ": " + why + " for " +
              seconds_text(std::round(std::chrono::duration<double>(now - *refused_since_).count() * 10) / 10) +
              " s (is the node running and listening there?)";
  if (nothing_to_send || !failure.empty()) {
    dialing_ = false;
    if (!connections_.empty()) return pump();  // the peer dialled us meanwhile
    if (!failure.empty()) fail_sends({ErrorCode::kConnectionFailed, failure});
    return;
  }
  if (pause.count() == 0) return dial(deadline, backoff, next);
  backoff_timer_.emplace(impl_.io, pause);
  backoff_timer_->async_wait([this, deadline, backoff, next](std::error_code ec) {
    if (ec || closing()) return;
    if (!connections_.empty()) {
      dialing_ = false;
      return pump();
    }
    const auto cap = std::chrono::duration_cast<std::chrono::milliseconds>(Seconds(impl_.spec.comm.reconnect_backoff_max_s));
    dial(deadline, std::min(backoff * 2, cap), next);
  });
}

void PeerState::add_connection(std::shared_ptr<Connection> connection) {
  if (closing()) return connection->send_close_and_stop();
  // A wcomm peer names its incarnation: a new one means it restarted.
  const std::string& incarnation = connection->peer_incarnation();
  if (!incarnation.empty()) {
    if (!incarnation_.empty() && incarnation != incarnation_) {
      // With the old incarnation's connections still up, what was in flight with it is lost.
      // Without them the peer went down before (and its waiters were told): only say so.
      if (!connections_.empty()) peer_restarted(incarnation_, incarnation);
      else emit(PeerEvent::Kind::kRestarted, "peer '" + peer_.node_id + "' came back as a new incarnation");
    }
    incarnation_ = incarnation;
  }
  const bool was_down = connections_.empty();
  connections_.push_back(connection);
  {
    inbox_.lock().add_reading(connection.get());
  }
  refresh_caller_read();
  refresh_stats();
  connection->start_reading();
  if (was_down) {
    spdlog::debug("wcomm[{}]: peer '{}' reached over {} (large payloads: {})", impl_.spec.local.node_id, peer_.node_id,
                  connection->describe(), connection->payload_path());
    emit(PeerEvent::Kind::kUp, "");
  }
  pump();
}

// What was in flight with the old incarnation will never complete: the message being
// written and every waiting recv fail with PeerRestartedError; messages not yet started go to
// the new incarnation, in order.
void PeerState::peer_restarted(const std::string& old_incarnation, const std::string& new_incarnation) {
  const Error error{ErrorCode::kPeerRestarted, "peer '" + peer_.node_id + "' restarted (incarnation " +
                                                   old_incarnation + " -> " + new_incarnation +
                                                   "); what was in flight with it is lost"};
  if (active_ && !active_->abort_error) active_->abort_error = error;
  auto old = connections_;
  for (auto& c : old) c->fail(error, /*local=*/true);
  for (auto& w : inbox_.lock().take_waiters(error)) complete_recv(w, error, /*by_loop=*/true, nullptr);
  emit(PeerEvent::Kind::kRestarted, error.message);
}

void PeerState::emit(PeerEvent::Kind kind, const std::string& reason) {
  spdlog::debug("wcomm[{}]: peer '{}' {} (session {}){}{}", impl_.spec.local.node_id, peer_.node_id,
                peer_event_name(kind), session_name(session()), reason.empty() ? "" : ": ", reason);
  if (impl_.peer_event_handler) impl_.peer_event_handler(PeerEvent{peer_.node_id, kind, reason});
}

void PeerState::send_heartbeat(Connection& connection) {
  if (closing()) return;
  // A frame on its way on this connection says that it lives; frames on another one do not:
  // the peer judges each connection by what it reads there, and after simultaneous dials each
  // side may send on a different one (the one it used first).
  const bool frames_here =
      active_connection_ == &connection || (!queue_.empty() && send_connection() == &connection) ||
      std::any_of(streaming_.begin(), streaming_.end(), [&](const auto& m) { return m->stream_connection == &connection; });
  if (frames_here) return;
  {
    std::lock_guard lock(inline_mutex_);  // waits out a caller's inline write
    if (posted_sends_ > 0) return;        // a caller's partial frame may be on its way to us
    if (inline_connection_.get() == &connection) inline_connection_.reset();
  }
  static const std::vector<std::uint8_t> frame = encode_control(FrameKind::kHeartbeat, {});
  if (connection.writing()) return refresh_inline();
  connection.write({asio::buffer(frame)}, [](std::error_code) {});  // its completion pumps
}

void PeerState::on_connection_lost(Connection& connection, const Error& error, bool local,
                                   std::optional<std::uint32_t> refused_tag) {
  auto it = std::find_if(connections_.begin(), connections_.end(), [&](auto& c) { return c.get() == &connection; });
  if (it == connections_.end()) return;
  auto keep_alive = *it;  // the connection may be running this very call
  connections_.erase(it);
  inbox_.lock().remove(keep_alive);  // (no longer admitted, nor paused)
  refresh_caller_read();
  refresh_stats();
  if (active_connection_ == &connection) {
    // A partly written frame cannot be resumed: that message fails, with the reason. Complete
    // it now rather than when the aborted write's handler runs (finish_active is idempotent
    // through active_).
    if (!active_->abort_error)
      active_->abort_error = Error{error.code == ErrorCode::kPeerRestarted ? error.code : ErrorCode::kConnectionClosed,
                                   "connection to '" + peer_.node_id + "' ended while sending: " + error.message};
    finish_active(asio::error::operation_aborted);
  }
  // Chunked messages started here cannot be finished on another connection: they fail.
  fail_streaming(&connection, Error{error.code == ErrorCode::kPeerRestarted ? error.code : ErrorCode::kConnectionClosed,
                                    "connection to '" + peer_.node_id + "' ended while sending: " + error.message});
  // Sends written here that wait for their ACK will never get it: they fail (the peer may or
  // may not have read them; the application decides whether to send again).
  fail_awaiting_acks(&connection, "the connection ended (" + error.message + ")");
  // Messages not yet started stay queued for the next connection (dialed below); they fail
  // only if the peer cannot be reached again, or at their own timeout.
  std::vector<std::shared_ptr<RecvWaiter>> waiting;
  std::shared_ptr<RecvWaiter> refused_owner;
  // (A recv's own timeout or cancel is not why the connection ended.) Recvs on other tags than
  // a refused frame's learn that the connection ended, and why, in a ConnectionClosedError.
  const Error recv_error =
      refused_tag ? Error{ErrorCode::kConnectionClosed, "the connection to '" + peer_.node_id +
                                                            "' ended: this side refused a frame on tag " +
                                                            std::to_string(*refused_tag) + " (" + error.message + ")"}
      : error.code == ErrorCode::kOperationTimeout || error.code == ErrorCode::kCancelled
          ? Error{ErrorCode::kConnectionClosed, error.message}
          : error;
  if (!local) {
    // The peer went away: recvs waiting on it learn why. A frame this side refused (too large,
    // bad data, an unknown type) fails the recv it would have reached, on its tag: the first
    // waiting there, else the next to come (its error takes the frame's place in the FIFO).
    auto in = inbox_.lock();
    if (refused_tag) refused_owner = in.route_refusal(*refused_tag, error);
    const bool reading_in_place = in.reading_in_place();
    // Recvs wait on the peer, not on one connection. One that ended cleanly while another to
    // the same peer lives (both sides dialed at once) leaves them to that one, which may still
    // bring their messages (a peer closing writes its last words on the connection it sends
    // on, and its end may be read on the other first); they fail when the last one ends. A
    // broken protocol fails them at once.
    if (connections_.empty() || error.code != ErrorCode::kConnectionClosed) waiting = in.take_waiters(recv_error);
    // A stream that broke with nobody waiting (a protocol error) must not vanish either: the
    // next recv on this peer that finds nothing queued reports it. The first such error is
    // kept; later ones are counted and logged, never overwrite it.
    if (!refused_tag && waiting.empty() && !reading_in_place && error.code != ErrorCode::kConnectionClosed) {
      if (!in.keep_unreported(error)) {
        impl_.stats.errors_without_waiter.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("wcomm[{}]: peer '{}': {} (nobody waiting; an earlier error is still unreported)",
                     impl_.spec.local.node_id, peer_.node_id, error.message);
      }
    }
  }
  if (refused_owner) complete_recv(refused_owner, error, /*by_loop=*/true, nullptr);
  for (auto& w : waiting) complete_recv(w, recv_error, /*by_loop=*/true, nullptr);
  if (connections_.empty()) emit(PeerEvent::Kind::kDown, error.message);
  if (!queue_.empty() || !capacity_waiters_.empty()) ensure_connection();
  pump();
}

void PeerState::drop_connections(const Error& error) {
  // Local: recvs nothing is being read into wait on (for the next connection); a frame being
  // read is abandoned, its recv_into failed, once its reader has let go (ReadOwner::close).
  auto connections = connections_;  // fail() takes each out of connections_
  for (auto& connection : connections) connection->fail(error, /*local=*/true);
}

void PeerState::close_all(const Error& error) {
  if (closing()) return;
  disable_inline();
  draining_ = true;  // nothing new starts; everything pending completes below
  backoff_timer_.reset();
  recv_timer_.reset();  // the recvs waiting fail below
  if (impl_.scheduler) impl_.scheduler->cancel(this);
  if (auto dial = std::move(pending_dial_)) dial->cancel();
  if (active_) {
    active_->abort_error = error;
    finish_active(asio::error::operation_aborted);
  }
  fail_streaming(nullptr, error);
  fail_sends(error);
  fail_awaiting_acks(nullptr, "the Comm closed (" + error.message + ")");
  std::vector<std::shared_ptr<RecvWaiter>> waiting;
  {
    auto in = inbox_.lock();
    in.close();
    waiting = in.take_waiters(error);
  }
  for (auto& w : waiting) complete_recv(w, error, /*by_loop=*/true, nullptr);
  auto connections = std::move(connections_);
  connections_.clear();
  refresh_caller_read();
  refresh_stats();
  for (auto& c : connections) c->send_close_and_stop();
  draining_ = false;
  closed_ = true;
}

PeerState::Session PeerState::session() const {
  if (closed_) return Session::kClosed;
  if (draining_) return Session::kDraining;
  if (!connections_.empty()) return Session::kUp;
  return dialing_ ? Session::kDialing : Session::kIdle;
}

const char* PeerState::session_name(Session s) {
  switch (s) {
    case Session::kIdle: return "idle";
    case Session::kDialing: return "dialing";
    case Session::kUp: return "up";
    case Session::kDraining: return "draining";
    case Session::kClosed: return "closed";
  }
  return "?";
}

}  // namespace wcomm
