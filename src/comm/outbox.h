// A peer's outbox: its bounded FIFO of sends and their admission (queue capacity,
// backpressure), the writer (one unit at a time: a whole frame, or a chunked message's next
// chunk, in the egress scheduler's grants), acknowledgements, and the fast path on which a
// caller's thread writes a frame itself while the peer is idle. Loop thread, but for
// send_from_caller, which shares the fast path's state with the loop under the outbox's one
// lock (inline_mutex_). Which connections there are is the session's (peer_session.h).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <asio.hpp>

#include "comm/deadlines.h"
#include "comm/operation.h"
#include "wcomm/codec.h"
#include "wcomm/comm.h"

namespace wcomm {

class Connection;
class Outbox;
class PeerState;
struct OutMessage;
using Clock = std::chrono::steady_clock;

// A send on its way out: queued, being written, or done.
struct OutMessage : CommOperation, std::enable_shared_from_this<OutMessage> {
  // kAwaitingAck: written; the promise waits for the peer's ACK (CommOptions::ack).
  enum class State { kWaitingForCapacity, kQueued, kActive, kAwaitingAck, kDone };
  std::uint64_t id = 0;
  EncodedFrame frame;
  Promise<SendResult> promise;
  State state = State::kWaitingForCapacity;
  // Its deadline (CommOperation): the peer's timer ends it there, in whatever state
  // (Outbox::expire_due_sends); an acked send keeps it while it waits for the ACK.
  std::optional<Error> abort_error;  // why an active write was aborted (timeout / cancel)
  std::uint64_t written_inline = 0;  // bytes the caller's thread already wrote (fast path)
  bool wants_ack = false;            // CommOptions::ack
  Connection* ack_connection = nullptr;  // kAwaitingAck: the connection it was written on
  std::uint64_t acked_wire_bytes = 0;    // kAwaitingAck: the frame's size, for SendResult
  // The peer's ACK was read before this side's write completion ran (both wait on the loop;
  // a reading caller's thread can take the ACK first): finish_active completes it at once.
  bool acked_early = false;
  std::shared_ptr<Connection> inline_connection;  // the connection those bytes went to
  // Scheduling (loop): the priority class (Priority, resolved: kHigh first), compression.
  Priority priority = Priority::kBulk;
  Compression compress = Compression::kAuto;
  // A chunked message: written as its head, then CHUNK frames, between other messages.
  bool chunked = false;
  std::uint64_t payload_sent = 0;          // of frame.payload_bytes, in CHUNKs written
  Connection* stream_connection = nullptr;  // the connection its chunks go to
  int failed_compressions = 0;              // chunks that did not shrink
  bool incompressible = false;              // stop trying
  bool sampled = false;                     // the compressibility sample was taken
  std::uint64_t bytes() const { return frame.wire_bytes(); }
  std::uint32_t frame_tag() const { return tag; }
  std::vector<asio::const_buffer> gather() const;
  std::vector<asio::const_buffer> payload_gather() const;  // the segments only
  void cancel() override;  // Future::cancel(): removes it from the queue, or aborts its write
};

class Outbox {
 public:
  Outbox(Comm::Impl& impl, PeerState& peer);

  // Caller's thread: Comm::send's encoded frame. When the peer is idle (connection up, nothing
  // queued or being written) it is written right here, with no hop to the loop, and a whole
  // write completes the Future at once (no OutMessage is made); otherwise, or for what the
  // kernel did not take at once, the message goes to the loop in FIFO order.
  Future<SendResult> send_from_caller(EncodedFrame frame, std::uint64_t id, Priority priority,
                                      const CommOptions& options);
  // Loop: no more writes from callers' threads until the peer is idle again.
  void disable_inline();
  void refresh_inline();
  void pump();  // writes pending ACKs, starts the next queued write if possible, re-decides the fast path
  void submit_send(std::shared_ptr<OutMessage> message, const CommOptions& options);
  void cancel_send(const std::shared_ptr<OutMessage>& message, Error error);
  // Sends are queued or wait for capacity: the peer must be dialed.
  bool has_sends() const { return !queue_.empty() || !capacity_waiters_.empty(); }
  // The connection messages go to (nullptr: none yet). Both sides send on the connection with
  // the smallest connection_id (wire-v1.md); once messages went out on one, they stay on it.
  Connection* send_connection() const;
  // An idle connection's heartbeat, written unless a frame is on its way there (then the
  // frame itself says the connection lives).
  void send_heartbeat(Connection& connection);
  // A frame that asked for an ACK was read on connection: acknowledge it when the connection
  // is free to write; an ACK came for message_ids this side sent.
  void queue_ack(const std::shared_ptr<Connection>& connection, std::uint64_t message_id);
  void on_acks(const std::vector<std::uint64_t>& message_ids);

  // The session's events. A connection ended: the frame being written there, the chunked
  // messages started there and the sends awaiting their ACK there fail; the others wait for
  // the next connection.
  void on_connection_lost(Connection& connection, const Error& error);
  void on_peer_restarted(const Error& error);  // the frame being written fails with error
  void fail_sends(const Error& error);         // the queued ones and those waiting for capacity
  void close(const Error& error);              // everything pending fails
  // The peer's timer fired (DeadlineTimer): the sends whose deadline came are cancelled with
  // a timeout (cancel_send). Returns the next deadline to arm it for (max: none).
  Clock::time_point expire_due_sends();

 private:
  // The writer (outbox_writer.cpp): one unit at a time (a whole frame, or a chunked message's
  // next chunk), each written in scheduler grants when the egress scheduler is on.
  struct Unit {
    std::shared_ptr<OutMessage> message;
    std::vector<asio::const_buffer> buffers;
    std::uint64_t total = 0, written = 0;
    std::uint64_t payload_advance = 0;  // chunked: payload bytes this unit carries
    std::array<std::uint8_t, 36> chunk_header{};
    std::vector<std::uint8_t> compressed;
    Clock::time_point started;
    std::uint64_t handed_over_base = 0;  // the connection's bytes_handed_over() at the start
  };
  const std::string& node_id() const;
  bool closing() const;
  // The one way a send completes (but for one written whole by its caller's thread, which
  // has no OutMessage): done, its deadline and its hold on the caller's memory let go of.
  void complete(OutMessage& message, Result<SendResult> result);
  void keep_deadline(OutMessage& message);
  const std::vector<std::shared_ptr<Connection>>& connections() const;
  bool has_capacity_for(std::uint64_t bytes) const;
  bool may_pass_capacity_waiters(const OutMessage& message) const;
  void admit_waiting();
  void admit(const std::shared_ptr<OutMessage>& message);
  void release(OutMessage& message);
  void continue_inline_write(const std::shared_ptr<OutMessage>& message);
  void write_acks(Connection& connection);
  // Sends awaiting their ACK on connection (nullptr: all) fail with delivery_unknown(why).
  void fail_awaiting_acks(Connection* connection, const std::string& why);
  Error delivery_unknown(const std::string& why) const;
  // Writer.
  void pump_queue();
  std::shared_ptr<OutMessage> pick_next();
  void start_unit(const std::shared_ptr<OutMessage>& message, Connection& connection);
  void build_chunk(Unit& unit, Connection& connection);
  bool compress_chunk(Unit& unit, Connection& connection, const std::vector<asio::const_buffer>& payload,
                      std::uint64_t n);
  void write_unit(std::shared_ptr<Unit> unit);
  void on_unit_written(const std::shared_ptr<Unit>& unit);
  void fail_streaming(Connection* connection, const Error& error);  // nullptr: all
  // Whether the message's last byte is handed over already: its write's completion is on
  // its way, and the send is delivered (a timeout, cancel or close that comes now is late).
  bool went_out_whole(const OutMessage& message) const;
  void finish_active(std::error_code ec);

  Comm::Impl& impl_;
  PeerState& peer_;
  std::deque<std::shared_ptr<OutMessage>> capacity_waiters_;
  std::deque<std::shared_ptr<OutMessage>> queue_;
  std::shared_ptr<OutMessage> active_;
  Connection* active_connection_ = nullptr;
  std::uint64_t queued_messages_ = 0;  // queued + active
  std::uint64_t queued_bytes_ = 0;
  std::unordered_map<std::uint64_t, std::shared_ptr<OutMessage>> awaiting_ack_;  // by message_id
  DeadlineList deadlines_;  // the sends with a timeout
  std::vector<std::shared_ptr<OutMessage>> streaming_;  // chunked messages started, not done
  std::shared_ptr<Unit> unit_;                          // being written
  // Set once this side wrote a DATA frame to the peer: a connection written on for the first
  // time after that flags its first frame (kFlagSupersedes). Set by the loop's writer and by
  // a caller's inline write.
  std::atomic<bool> wrote_data_{false};
  // Fast path shared with callers' threads. inline_connection_ is set only while the peer is
  // idle; callers write on it holding inline_mutex_, and the loop clears it (taking the
  // mutex, so waiting out a caller's write) before it writes or closes anything itself.
  std::mutex inline_mutex_;
  std::shared_ptr<Connection> inline_connection_;
  std::uint64_t posted_sends_ = 0;  // guarded by inline_mutex_: posted, not yet submitted
};

}  // namespace wcomm
