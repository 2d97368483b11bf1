// Internals of Comm: the loop (Impl), one PeerState per configured peer, and Connection.
// Threading: everything here is touched only on the loop thread, except the members of
// Impl marked "any thread". Loop-only functions end in FromLoop where it is not obvious.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "comm/peer_directory.h"
#include "comm/compression.h"
#include "comm/egress.h"
#include "comm/egress_scheduler.h"
#include "comm/frame_reader.h"
#include "comm/inbox.h"
#include "comm/outbox.h"
#include "comm/peer_session.h"
#include "comm/read_owner.h"
#include "core/operation.h"
#include "transport/thread_waker.h"
#include "transport/transport.h"
#include "comm/cluster_auth.h"
#include "wcomm/comm.h"

namespace wcomm {

class PeerState;
class Connection;
using Clock = std::chrono::steady_clock;

std::string new_connection_id();

// One receive operation (recv, recv_into, recv_for), waiting in its peer's FIFO for its tag
// (Inbox). Its sink is one of two: the promise behind its Future, or a slot on the stack of
// the thread that reads for it (recv_for, until it returns: then a promise takes its place).
struct RecvWaiter : CommOperation, std::enable_shared_from_this<RecvWaiter> {
  std::optional<Promise<Received>> promise;  // set by make()
  RecvSlot* slot = nullptr;                  // or this
  std::vector<Tensor> into;  // recv_into destinations (empty for a plain recv)
  bool claimed = false;      // a frame is being read into `into`: it completes this waiter
  bool done = false;
  // Its deadline (CommOperation, set before the waiter is shared): the peer's one timer ends
  // it there (PeerState::arm_deadline_timer), whoever reads for it meanwhile.
  void cancel() override;
  // A thread blocked on a recv reads the message itself (PeerState::help_recv), with or
  // without a timeout: the timer ends the recv at its deadline whoever reads.
  void help(Clock::time_point deadline) override;
  void callback_set() override;  // then(): nobody waits, so the loop must read for it
  static std::shared_ptr<RecvWaiter> make(const std::shared_ptr<Comm::Impl>& owner, PeerState* state,
                                          std::uint32_t tag, std::vector<Tensor> into);
};

// One transport connection to a peer: the COMM v1 handshake, writes, and (after the
// handshake) its frames, read by whoever ReadOwner says: the loop, or a thread blocked in
// recv() (PeerState::help_recv). Loop thread, except where ReadOwner says otherwise.
class Connection : public std::enable_shared_from_this<Connection>, private ReadOwner::Sink {
 public:
  Connection(Comm::Impl& impl, std::unique_ptr<transport::Connection> stream);
  ~Connection() override;

  // Dialer side: send HELLO, expect HELLO_ACK from `peer`. Acceptor side: expect HELLO from a
  // configured peer, answer HELLO_ACK. `done` gets nullopt on success. Both give up at deadline.
  void handshake_as_dialer(PeerState& peer, Clock::time_point deadline, std::function<void(std::optional<Error>)> done);
  void handshake_as_acceptor(Clock::time_point deadline, std::function<void(std::optional<Error>)> done);

  void start_reading();   // after the handshake: read DATA frames until the end
  void resume_reading() { reader_owner_.resume(); }  // after a pause for the inbound bound
  void read_soon() { reader_owner_.read_soon(); }    // a recv needs the loop to read now
  bool standing_down() const { return reader_owner_.standing_down(); }  // any thread
  // Any thread: a caller blocked on `until` reads for it (ReadOwner::read_for).
  void read_for(const ReadOwner::Awaited& until, Clock::time_point deadline, std::chrono::microseconds busy_poll) {
    reader_owner_.read_for(until, deadline, busy_poll);
  }
  ReadOwner& reader_owner() { return reader_owner_; }  // for ReadOwner::read_any

  void write(std::vector<asio::const_buffer> buffers, std::function<void(std::error_code)> done);
  bool writing() const { return writing_; }
  // Set once this side has written a DATA frame here; from then on the peer's messages keep
  // to this connection (switching could reorder them at the receiver).
  void mark_used() { used_.store(true, std::memory_order_relaxed); }
  bool used() const { return used_.load(std::memory_order_relaxed); }
  // Any thread, under the outbox's inline mutex: see Outbox::send_from_caller.
  std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) {
    const std::size_t n = stream_->try_write(buffers, ec);
    bytes_written_.fetch_add(n, std::memory_order_relaxed);
    return n;
  }
  // Ends the connection. local: we chose to drop it (timeout, close); else it failed.
  void fail(const Error& error, bool local);
  void send_close_and_stop();

  const std::string& connection_id() const { return connection_id_; }
  // The peer's incarnation (a wcomm peer's HELLO / HELLO_ACK says it; empty for V0.1).
  const std::string& peer_incarnation() const { return peer_incarnation_; }
  bool acks() const { return acks_; }  // both sides listed "ack"
  bool supersedes() const { return supersede_; }  // both sides listed "supersede"
  bool retry_keys() const { return retry_keys_; }  // both sides listed "retry-key"
  // Whether the peer holds this connection established, so that what is written here is read
  // in order with what was written on its other connections (Inbox::reading_). A dialer
  // knows at HELLO_ACK; an acceptor once the dialer sent anything after it (with "supersede"
  // the dialer sends a HEARTBEAT at once; a keyed dialer's AUTH). Until then, with
  // "supersede", no DATA is written here: a HELLO_ACK held up on its way would otherwise let
  // the peer establish it late, after frames on a newer connection, and take its stale
  // frames as new. Any thread.
  bool peer_holds_it() const { return !supersede_ || peer_holds_it_.load(std::memory_order_acquire); }
  // How large this connection's chunks are (0: messages go whole: a side did not list
  // "chunks", or CommConfig::chunk_bytes is 0). On one host (shm, unix) at
  // least kSameHostChunkBytes: such a link moves CommConfig::chunk_bytes in microseconds, so
  // small chunks buy no responsiveness there, only a hand-off per chunk (over shm, each chunk
  // is a cross-memory-attach read the writer waits for: 64 MiB went at half speed). While
  // the transport bounds what the kernel holds for it (tcp_target_queue_delay_us), at most
  // that bound (never under 16 KiB, the bound's floor): a message behind a chunk then waits
  // about as long as the bound lets it, not for the rest of a larger chunk.
  std::uint64_t chunk_bytes() const {
    const std::uint64_t bound = stream_->send_bound_bytes();
    return bound && chunk_bytes_ ? std::min(chunk_bytes_, bound) : chunk_bytes_;
  }
  static constexpr std::uint64_t kSameHostChunkBytes = 16ull << 20;
  bool zstd() const { return zstd_; }      // both sides listed "zstd" (and "chunks")
  const transport::Connection::Traits& traits() const { return traits_; }
  // The link's measured drain rate for bulk writes (bytes/s; 0 until measured), for
  // adaptive compression. Loop only.
  LinkRate& link_rate() { return link_rate_; }
  // Loop: message_ids read here that asked for an ACK and have not been acknowledged yet.
  std::vector<std::uint64_t> take_pending_acks() { return std::exchange(pending_acks_, {}); }
  bool has_pending_acks() const { return !pending_acks_.empty(); }
  // Under the peer's inbox lock (Inbox::Locked::admit): the peer wrote DATA here; it moved to
  // another connection since (superseded: a frame from it here is older); the connection is
  // being ended for that, and every frame read here is dropped.
  bool peer_wrote_data = false;
  bool superseded = false;
  bool ending = false;
  void queue_ack(std::uint64_t message_id) { pending_acks_.push_back(message_id); }
  PeerState* peer() const { return peer_; }
  bool established() const { return established_; }
  bool auth_refused() const { return auth_refused_; }  // dialer: the cluster keys (or TLS names) do not match
  std::string describe() const { return stream_->describe(); }
  std::string peer_host() const { return stream_->peer_host(); }
  std::string_view payload_path() const { return stream_->payload_path(); }
  // Bytes this connection's writes handed over beyond recall (transport::Connection).
  std::uint64_t bytes_handed_over() const { return stream_->bytes_handed_over(); }

 private:
  // Handshake: the loop reads one control frame with the frame reader.
  void read_handshake_frame(std::function<void(Frame)> next);
  // Features this side offers in HELLO, and what a peer's list means for this connection.
  std::vector<std::string> offered_features() const;
  void accept_features(const std::vector<std::string>& features);
  // Liveness (wcomm peers): a heartbeat when idle, a peer silent too long declared dead.
  void start_liveness();
  void on_liveness_tick();
  void start_handshake_timer(Clock::time_point deadline, const char* what);
  // Cluster key (cluster_auth.h): whether this node has one, the dialer's check of the
  // acceptor's proof (and its own proof sent), the acceptor's refusal of a dialer.
  bool keyed() const;
  std::optional<Error> check_acceptor_proof(const std::vector<std::string>& features);
  void refuse(const Error& why);
  void admit();
  void finish_handshake(std::optional<Error> error);
  // ReadOwner::Sink (called by whoever reads).
  Result<DecodedData> decode(const FrameHeader& header, std::span<const std::uint8_t> manifest) override;
  void on_frame(Frame frame, ReadOwner::Reader reader, Later& later) override;
  void on_acks(const Frame& frame, ReadOwner::Reader reader) override;
  void on_heartbeat(ReadOwner::Reader) override { peer_spoke(); }
  bool inbound_full() override;
  void abandon_frame(const Error& why, Later& later) override;
  bool others_waiting(std::size_t own) override;
  void on_read_failed(const Error& error) override { fail(error, false); }

  Comm::Impl& impl_;
  std::unique_ptr<transport::Connection> stream_;
  const transport::Connection::Traits traits_;
  FrameReader reader_;
  ReadOwner reader_owner_;
  PeerState* peer_ = nullptr;
  std::optional<Peer> joining_;  // acceptor: an unknown dialer that may join (peer_join.cpp)
  std::string connection_id_;
  bool established_ = false;
  bool failed_ = false;
  bool writing_ = false;
  std::atomic<bool> used_{false};
  std::function<void(std::optional<Error>)> handshake_done_;
  std::optional<asio::steady_timer> handshake_timer_;
  std::string peer_incarnation_;
  auth::Exchange auth_;  // the cluster-key exchange of this connection's handshake
  bool auth_refused_ = false;
  bool heartbeats_ = false;                 // negotiated
  bool acks_ = false;                       // negotiated
  bool chunks_ = false, zstd_ = false;      // negotiated
  bool supersede_ = false;                  // negotiated
  bool retry_keys_ = false;                 // negotiated
  bool dialer_ = false;
  std::atomic<bool> peer_holds_it_{false};
  void peer_spoke();  // any frame read after the handshake: see peer_holds_it()
  std::uint64_t chunk_bytes_ = 0;           // set with the handshake: chunk_bytes()
  LinkRate link_rate_;
  std::vector<std::uint64_t> pending_acks_;  // loop only
  Clock::duration silence_limit_{};         // 3 x the longer of the two heartbeat intervals
  std::atomic<std::uint64_t> bytes_written_{0};
  std::optional<asio::steady_timer> liveness_timer_;
  std::uint64_t last_read_seen_ = 0, last_written_seen_ = 0;
  Clock::time_point last_heard_{};
  // The frames being read, as charged to the peer's inbound bound.
  std::atomic<std::uint64_t> partial_charge_{0};
  void release_partial_charge(std::uint64_t bytes);
  // Frames being read into a recv_into's tensors (the reading owner's), by message_id: more
  // than one when chunked messages interleave.
  struct IntoClaim {
    std::shared_ptr<RecvWaiter> waiter;
    std::optional<std::string> mismatch;
  };
  std::unordered_map<std::uint64_t, IntoClaim> frames_into_;
};

// One configured peer: its session (peer_session.h: connections, dialing, incarnation), its
// outbox (outbox.h: the sends) and its receive side (peer_receive.cpp: recvs, delivery,
// completions, over the Inbox's state). Each part has its own lock, or none.
class PeerState {
 public:
  PeerState(Comm::Impl& impl, Peer peer);
  const Peer& peer() const { return peer_; }
  PeerSession& session() { return session_; }
  const PeerSession& session() const { return session_; }
  Outbox& outbox() { return outbox_; }
  PeerStats stats();  // any thread

  // ---- receive side (peer_receive.cpp) ----
  // Caller's thread: completes or parks a recv at once (its deadline with it, if any).
  void recv_from_caller(const std::shared_ptr<RecvWaiter>& waiter, std::optional<Seconds> timeout);
  // Loop: the peer's one timer (deadlines.h), for the earliest deadline of its sends and recvs
  // waiting. Armed again when an operation comes with an earlier deadline than it is set for
  // (DeadlineList::keep says when; in a stream of operations with one timeout, never), and when
  // it fires: the sends and recvs whose deadline came fail with a timeout, and it is armed for
  // the next one.
  void arm_deadline_timer(Clock::time_point at);
  void stop_deadline_timer() { deadline_timer_.stop(); }  // closing: everything fails anyway
  // A parked recv whose deadline asks the timer to be armed earlier (park returned true): the
  // caller's thread posts it to the loop.
  void rearm_for(const std::shared_ptr<RecvWaiter>& waiter);
  // Caller's thread: Comm::recv_for. A queued message is taken at once; else, where this
  // thread can read the connection, it parks a recv whose sink is a slot on its stack (no
  // allocation, no promise) and reads until wait_until (or the timeout). Both come back in a
  // ready Future. Otherwise a recv with a promise waits in its place (or last on the tag),
  // and its Future completes later.
  Future<Received> recv_for(std::uint32_t tag, Clock::time_point wait_until, std::optional<Seconds> timeout);
  // Caller's thread, about to block on a parked recv: reads the connection itself until the
  // message is there or the deadline passes (ReadOwner::read_for). Returns early if it cannot.
  void help_recv(const std::shared_ptr<RecvWaiter>& waiter, Clock::time_point deadline);
  // Any thread: the connection a thread waiting for waiter may read itself (null: none).
  std::shared_ptr<Connection> connection_to_help(const RecvWaiter& waiter);
  // Loop: a recv needs the loop to read for it now (see Connection::read_soon).
  void read_soon();
  // Any thread: whether the connection a waiting thread would read is left to such a thread.
  bool loop_stands_down();
  void cancel_recv(const std::shared_ptr<RecvWaiter>& waiter, Error error);
  // A decoded message from connection `from` of this peer, read on the loop or not (then
  // callbacks go to the loop). The loop's callbacks go to `later` (see ReadOwner). False: the
  // message was dropped, its connection superseded (Inbox::Locked::admit); nothing acks it.
  // retry_key: a repeat of a message delivered with that key is dropped, and true (acked).
  bool deliver(Connection& from, std::uint8_t flags, std::uint32_t tag, Received&& message, bool by_loop, Later& later,
               std::optional<std::uint64_t> retry_key = std::nullopt);
  // The recv_into waiter a frame on tag is read into, if the next waiter is one; claimed.
  std::shared_ptr<RecvWaiter> claim_into_waiter(std::uint32_t tag);
  // A claimed waiter whose frame was refused before it was read: waiting again, first in line.
  void unclaim_into_waiter(const std::shared_ptr<RecvWaiter>& waiter);
  // Completes a claimed waiter: with its frame from `from` (false, and an error instead, when
  // `from` was superseded), or with an error (from: nullptr).
  bool complete_into_waiter(Connection* from, std::uint8_t flags, const std::shared_ptr<RecvWaiter>& waiter,
                            Result<Received> result, bool by_loop, Later& later);
  // Any thread: whether more than `beyond` recvs on this peer are waiting.
  bool recvs_waiting(std::size_t beyond = 0);
  // Inbound bound: true if the connection must pause until the application drains. Frames
  // being read count from when their storage is allocated (charge_partial) until they are
  // delivered or dropped (release_partial; any thread): connections that each hold most of a
  // large frame cannot pin memory past the bound.
  bool pause_if_full(Connection& connection);
  void charge_partial(std::uint64_t bytes);
  void release_partial(std::uint64_t bytes);

  // ---- the session's events, for the receive side (loop) ----
  void on_connection_added(const std::shared_ptr<Connection>& connection);
  void on_connection_removed(const std::shared_ptr<Connection>& connection);  // nullptr: all (closing)
  // A connection ended (session().connections() no longer has it): the recvs waiting learn
  // why, unless it was local or another connection to the peer lives on; a refused frame
  // fails the recv it would have reached.
  void fail_recvs_after_loss(const Error& error, bool local, std::optional<std::uint32_t> refused_tag);
  void fail_waiting_recvs(const Error& error);  // the peer restarted
  void close_receiving(const Error& error);     // every recv fails; the inbox takes no more

 private:
  void complete_recv(std::shared_ptr<RecvWaiter> waiter, Result<Received>&& result, bool by_loop, Later* later);
  void post_in_order(std::function<void()> fn);
  void refresh_caller_read();
  void resume_paused();
  void finish_taken(RecvWaiter& waiter, Result<Received> result);
  Clock::time_point expire_due();  // the timer fired: the next deadline (max: none)
  void after_taken();  // a message left the inbox: a connection paused for the bound may read on
  // Ends the connections a frame's supersede flag left behind (Inbox::Locked::admit).
  void end_superseded(Connection& from, const std::vector<Connection*>& superseded);

  Comm::Impl& impl_;
  Peer peer_;
  PeerSession session_;
  Outbox outbox_;
  // Receive side, shared with callers' threads under the inbox's own lock.
  Inbox inbox_;
  DeadlineTimer deadline_timer_;  // loop only: see arm_deadline_timer
  // Completions handed to the loop by a reading caller, not run yet; while there are any,
  // the loop queues its own behind them, so callbacks run in the order messages arrived.
  std::atomic<std::uint64_t> deferred_completions_{0};
};

struct Comm::Impl {
  explicit Impl(CommSpec s);
  ~Impl();

  asio::io_context io;  // first member: destroyed last
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;
  CommSpec spec;
  std::vector<std::unique_ptr<transport::Listener>> listeners;  // one per local address
  std::unique_ptr<transport::Listener> same_host_listener;        // see same_host.h
  PeerDirectory peers;  // any thread (Comm::add_peer / remove_peer change it)
  std::set<std::shared_ptr<Connection>> handshaking;                     // loop only
  std::deque<std::weak_ptr<Connection>> handshake_order;                 // loop only: oldest first
  std::uint64_t handshakes_evicted = 0;                                  // loop only
  Clock::time_point last_eviction_log{};
  std::shared_ptr<const transport::TlsContext> tls;  // set by create when CommConfig::tls is
  std::set<std::string> refused_sources;  // loop only: sources already logged as refused, by reason

  // Any thread.
  mutable std::shared_mutex codec_mutex;  // guards registry and allocator
  TypeRegistry registry;
  BufferAllocator allocator;
  std::atomic<std::uint64_t> next_message_id{1};
  std::atomic<bool> closed{false};
  struct AtomicStats {
    std::atomic<std::uint64_t> messages_sent{0}, messages_received{0}, wire_bytes_sent{0},
        wire_bytes_received{0}, bytes_copied{0}, connections_dialed{0}, connections_accepted{0},
        connections_rejected{0}, messages_read_by_receivers{0}, messages_read_busy_polling{0},
        errors_without_waiter{0}, duplicates_dropped{0}, messages_chunked{0}, chunks_sent{0}, compression_bytes_in{0},
        compression_bytes_out{0}, compression_nanoseconds{0}, bytes_decompressed{0};
  } stats;
  // Loop only: the node-wide egress scheduler (off without egress_quantum_bytes), the chunk
  // compressor and its measured speed (bytes/s; 0 until measured).
  std::optional<EgressScheduler> scheduler;
  ChunkCompressor compressor;
  double compressor_rate = 0;

  // Runs fn on the loop. From any thread: false (fn not run) once the loop has finished,
  // after close: nothing is ever posted where it would not run.
  bool post(std::function<void()> fn);
  std::weak_ptr<Impl> self;          // set by Comm::create
  // Where a Future's late callback runs: the loop, or once it has finished a thread of its own.
  // Made once (by Comm::create), shared by all of this Comm's promises.
  SharedPoster poster;
  static SharedPoster make_poster(std::weak_ptr<Impl> self);
  const std::string incarnation = new_connection_id().substr(0, 16);  // this Comm's, for HELLO
  std::function<void(const PeerEvent&)> peer_event_handler;          // loop only
  // Comm::watch_peer_events; report() calls the handler, then these (loop thread).
  std::mutex watchers_mutex;
  std::vector<std::pair<std::uint64_t, std::function<void(const PeerEvent&)>>> peer_watchers;
  std::uint64_t next_watcher = 1;
  void report(const PeerEvent& event);
  std::mutex post_mutex;
  bool loop_finished = false;        // under post_mutex
  transport::Options transport_options() const;
  PeerState* find_peer(std::string_view node_id) const { return peers.find(node_id); }
  // The same for a Peer; one that Comm::peer() returned is found by its address.
  PeerState* find_peer(const Peer& peer) const { return peers.find(peer); }
  // Drops a connection a caller's thread held while it read. One the loop let go of
  // meanwhile (closed; held by nobody else) goes back to the loop to be destroyed there, not
  // on this thread beside the loop's last handlers for it.
  void let_go(std::shared_ptr<Connection>&& connection);
  void on_accepted(std::unique_ptr<transport::Connection> stream);
  // Joining (peer_join.cpp): the directory entry an unknown dialer's HELLO describes (an
  // error when joins are off or the HELLO lists no usable address), and its admission once
  // the handshake checked out (kJoined reported; refused past max_peers).
  Result<Peer> joining_peer(const Control& hello, const std::string& source_host) const;
  Result<PeerState*> join_peer(Peer peer, const std::string& source);
  void evict_oldest_handshakes();
  void evict_from_source(const std::string& source);
  void close_from_loop();
};

// Listens on every local address (bind_host in place of the V0.1 host, when given), and
// records where each listener is reached (ephemeral ports resolved) in the spec; peers on
// this host get the same-host listener too (same_host.h). Throws what listening threw.
void listen_on_local_addresses(Comm::Impl& impl);
// What a peer of this Comm must be, at create, add_peer or a join; InvalidArgumentError.
void check_peer(const Comm::Impl& impl, const Peer& p);
// Comm::create: accept_unknown_peers without a cluster key or TLS only where the config says
// so and only on loopback / unix addresses; InvalidArgumentError with the reason.
void check_join_policy(const CommSpec& spec);

std::string seconds_text(double seconds);
// Saturating (deadline.h): a span too long for the clock is duration::max(), never an overflow.
inline Clock::duration to_duration(Seconds s) { return time_left(deadline_after(s, Clock::time_point{}), Clock::time_point{}); }
// The deadline of an operation's timeout (none: never).
inline Clock::time_point deadline_of(std::optional<Seconds> timeout) {
  return timeout ? deadline_after(*timeout) : Clock::time_point::max();
}
Error timeout_error(const char* what, const Peer& peer, Seconds timeout);

}  // namespace wcomm
