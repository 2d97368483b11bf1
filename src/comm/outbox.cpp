// Outbox (outbox.h): admission and the FIFO, the callers' fast path, cancels, ACKs, and what
// a connection's end, a restart or close does to the sends. The writer is outbox_writer.cpp.
#include "comm/outbox.h"

#include <algorithm>

#include "comm/comm_impl.h"

namespace wcomm {

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

std::vector<asio::const_buffer> OutMessage::gather() const {
  std::vector<asio::const_buffer> buffers;
  gather_frame(frame, buffers);
  return buffers;
}

Outbox::Outbox(Comm::Impl& impl, PeerState& peer) : impl_(impl), peer_(peer) {}

const std::string& Outbox::node_id() const { return peer_.peer().node_id; }
bool Outbox::closing() const { return peer_.session().closing(); }
const std::vector<std::shared_ptr<Connection>>& Outbox::connections() const { return peer_.session().connections(); }

void Outbox::complete(OutMessage& message, Result<SendResult> result) {
  message.state = OutMessage::State::kDone;
  deadlines_.forget(message);
  message.frame.segments.clear();  // the caller's memory is theirs again
  message.promise.complete(std::move(result));
}

// ---- deadlines ---------------------------------------------------------------------------

void Outbox::keep_deadline(OutMessage& message) {
  if (deadlines_.keep(message)) peer_.arm_deadline_timer(message.deadline);
}

Clock::time_point Outbox::expire_due_sends() {
  const auto now = Clock::now();
  while (CommOperation* due = deadlines_.pop_due(now)) {
    auto& message = static_cast<OutMessage&>(*due);
    // (A frame handed over whole meanwhile is delivered: cancel_send leaves it be.)
    cancel_send(message.shared_from_this(), timeout_error("send", peer_.peer(), *message.timeout));
  }
  return deadlines_.rearm();
}

bool Outbox::has_capacity_for(std::uint64_t bytes) const {
  const CommConfig& c = impl_.spec.comm;
  return queued_messages_ + 1 <= c.max_peer_queued_messages && queued_bytes_ + bytes <= c.max_peer_queued_bytes;
}


Future<SendResult> Outbox::send_from_caller(EncodedFrame frame, std::uint64_t id, Priority priority,
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
  message->peer = &peer_;
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

void Outbox::disable_inline() {
  std::lock_guard lock(inline_mutex_);  // waits out a caller's write in progress
  inline_connection_.reset();
}

void Outbox::refresh_inline() {
  std::shared_ptr<Connection> idle_connection;
  Connection* send = send_connection();
  const bool scheduled = impl_.scheduler && impl_.scheduler->enabled();
  if (!closing() && !active_ && queue_.empty() && streaming_.empty() && capacity_waiters_.empty() && !scheduled &&
      send && !send->writing() && (send->used() || !wrote_data_.load(std::memory_order_relaxed))) {  // (a first frame there may need its flag)
    for (const auto& c : connections())
      if (c.get() == send) idle_connection = c;
  }
  std::lock_guard lock(inline_mutex_);
  inline_connection_ = posted_sends_ == 0 ? std::move(idle_connection) : nullptr;
}

void Outbox::continue_inline_write(const std::shared_ptr<OutMessage>& message) {
  auto connection = std::move(message->inline_connection);
  message->state = OutMessage::State::kActive;
  queued_messages_ += 1;
  queued_bytes_ += message->bytes();
  bool alive = std::find(connections().begin(), connections().end(), connection) != connections().end();
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

void Outbox::submit_send(std::shared_ptr<OutMessage> message, const CommOptions& options) {
  disable_inline();  // the loop may write from here on
  if (closing()) return complete(*message, peer_.session().close_error());
  if (options.timeout) {
    message->timeout = options.timeout;
    message->deadline = deadline_of(options.timeout);
    keep_deadline(*message);
  }
  if (message->written_inline > 0) return continue_inline_write(message);
  if (has_capacity_for(message->bytes()) && (capacity_waiters_.empty() || may_pass_capacity_waiters(*message)))
    return admit(message);
  if (!options.wait_for_capacity) {
    const CommConfig& c = impl_.spec.comm;
    complete(*message, Error{
        ErrorCode::kBackpressure,
        "send queue to '" + node_id() + "' is full (" + std::to_string(queued_messages_) + " messages, " +
            std::to_string(queued_bytes_) + " bytes queued; limits max_peer_queued_messages=" +
            std::to_string(c.max_peer_queued_messages) + ", max_peer_queued_bytes=" +
            std::to_string(c.max_peer_queued_bytes) + "); retry later or send with wait_for_capacity"});
    return;
  }
  message->state = OutMessage::State::kWaitingForCapacity;
  capacity_waiters_.push_back(std::move(message));
}

// An urgent message that fits does not wait behind bulk waiting for queue capacity (a ping
// behind a second 64 MiB tensor would), unless one of them is on its tag (per-tag order).
bool Outbox::may_pass_capacity_waiters(const OutMessage& message) const {
  if (message.priority != Priority::kHigh) return false;
  return std::none_of(capacity_waiters_.begin(), capacity_waiters_.end(), [&](const auto& w) {
    return w->state != OutMessage::State::kDone && w->tag == message.tag;
  });
}

void Outbox::admit(const std::shared_ptr<OutMessage>& message) {
  message->state = OutMessage::State::kQueued;
  queued_messages_ += 1;
  queued_bytes_ += message->bytes();
  queue_.push_back(message);
  peer_.session().ensure_connection();
  pump();
}

void Outbox::admit_waiting() {
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

void Outbox::release(OutMessage& message) {
  queued_messages_ -= 1;
  queued_bytes_ -= message.bytes();
}

void Outbox::cancel_send(const std::shared_ptr<OutMessage>& message, Error error) {
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
      awaiting_ack_.erase(message->id);
      return complete(*message, delivery_unknown("its wait ended (" + error.message + ")"));
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
  complete(*message, std::move(error));
  admit_waiting();
}

Connection* Outbox::send_connection() const {
  // Both sides send on the connection with the smallest connection_id (wire-v1.md), so
  // simultaneous dials converge on one connection; but once messages went out on one, they
  // stay on it while it lives: frames on two connections may be read in either order.
  Connection* best = nullptr;
  Connection* used = nullptr;
  for (const auto& c : connections()) {
    if (!c->peer_holds_it()) continue;  // (see there)
    if (c->used() && (!used || c->connection_id() < used->connection_id())) used = c.get();
    if (!best || c->connection_id() < best->connection_id()) best = c.get();
  }
  return used ? used : best;
}

void Outbox::pump() {
  for (const auto& c : connections())
    if (c->has_pending_acks() && !c->writing() && active_connection_ != c.get()) write_acks(*c);
  pump_queue();
  refresh_inline();
}

// ---- acknowledgements (CommOptions::ack, "ack" feature) -----------------------------------

void Outbox::queue_ack(const std::shared_ptr<Connection>& connection, std::uint64_t message_id) {
  if (closing() || std::find(connections().begin(), connections().end(), connection) == connections().end()) return;
  connection->queue_ack(message_id);
  pump();
}

// One ACK frame for every acknowledgement queued on the connection, written between frames.
void Outbox::write_acks(Connection& connection) {
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

void Outbox::on_acks(const std::vector<std::uint64_t>& message_ids) {
  for (std::uint64_t id : message_ids) {
    auto found = awaiting_ack_.find(id);
    if (found == awaiting_ack_.end()) {
      if (active_ && active_->id == id) active_->acked_early = true;  // its write completion is still to run
      continue;  // else timed out or cancelled meanwhile
    }
    auto message = std::move(found->second);
    awaiting_ack_.erase(found);
    impl_.stats.messages_sent.fetch_add(1, std::memory_order_relaxed);
    impl_.stats.wire_bytes_sent.fetch_add(message->acked_wire_bytes, std::memory_order_relaxed);
    complete(*message, SendResult{message->id, message->acked_wire_bytes});
  }
}

Error Outbox::delivery_unknown(const std::string& why) const {
  return {ErrorCode::kDeliveryUnknown, "sent to '" + node_id() + "' whole, but " + why +
                                           " before it acknowledged the message: the peer may have it"};
}

void Outbox::fail_awaiting_acks(Connection* connection, const std::string& why) {
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
  for (auto& m : failed) complete(*m, error);
}

void Outbox::fail_sends(const Error& error) {
  auto fail_all = [&](std::deque<std::shared_ptr<OutMessage>>& q, bool counted) {
    for (auto& m : q) {
      if (m->state == OutMessage::State::kDone) continue;
      if (counted) release(*m);
      complete(*m, error);
    }
    q.clear();
  };
  fail_all(queue_, true);
  fail_all(capacity_waiters_, false);
}

void Outbox::send_heartbeat(Connection& connection) {
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

// ---- the session's events ----------------------------------------------------------------

void Outbox::on_connection_lost(Connection& connection, const Error& error) {
  const ErrorCode code = error.code == ErrorCode::kPeerRestarted ? error.code : ErrorCode::kConnectionClosed;
  if (active_connection_ == &connection) {
    // A partly written frame cannot be resumed: that message fails, with the reason. Complete
    // it now rather than when the aborted write's handler runs (finish_active is idempotent
    // through active_).
    if (!active_->abort_error)
      active_->abort_error = Error{code, "connection to '" + node_id() + "' ended while sending: " + error.message};
    finish_active(asio::error::operation_aborted);
  }
  // Chunked messages started here cannot be finished on another connection: they fail.
  fail_streaming(&connection, Error{code, "connection to '" + node_id() + "' ended while sending: " + error.message});
  // Sends written here that wait for their ACK will never get it: they fail (the peer may or
  // may not have read them; the application decides whether to send again). Messages not
  // yet started stay queued for the next connection; they fail only if the peer cannot be
  // reached again, or at their own timeout.
  fail_awaiting_acks(&connection, "the connection ended (" + error.message + ")");
}

void Outbox::on_peer_restarted(const Error& error) {
  if (active_ && !active_->abort_error) active_->abort_error = error;
}

void Outbox::close(const Error& error) {
  disable_inline();  // (the peer's timer was stopped: every send completes below)
  if (impl_.scheduler) impl_.scheduler->cancel(this);
  if (active_) {
    active_->abort_error = error;
    finish_active(asio::error::operation_aborted);
  }
  fail_streaming(nullptr, error);
  fail_sends(error);
  fail_awaiting_acks(nullptr, "the Comm closed (" + error.message + ")");
}

}  // namespace wcomm
