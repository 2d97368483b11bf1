// Comm: tagged, structured messages between the nodes of a static peer directory, over one
// reusable full-duplex connection per peer pair (TCP, or a Unix socket on one host), speaking
// COMM v1 (docs/wire-format.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wcomm/codec.h"
#include "wcomm/config.h"
#include "wcomm/errors.h"
#include "wcomm/future.h"
#include "wcomm/tensor.h"
#include "wcomm/value.h"

namespace wcomm {

using Seconds = std::chrono::duration<double>;

// How urgently a message goes out (CommOptions::priority). Between the chunks of a large
// message (CommConfig::chunk_bytes), and ahead of queued messages of a lower class, a
// message of a higher class goes first; within a class, messages go in the order sent.
// Per (peer, tag) the order is always kept: a message never overtakes an earlier one on its
// tag. kAuto: kHigh for a message of at most chunk_bytes (256 KiB by default: control
// traffic, small tensors), kBulk for a larger one.
enum class Priority : std::uint8_t { kAuto, kHigh, kNormal, kBulk };
// Whether a message's chunks may be compressed (CommOptions::compress; CommConfig::compression
// must be "auto" and the peer a wcomm node over TCP). kAuto: when the link is measured slower
// than the compressor and a first sample of the message shrinks. kOn: always tried (still
// skipped for data that does not shrink). kOff: never (e.g. already compressed data).
enum class Compression : std::uint8_t { kAuto, kOn, kOff };

// Per-operation options (V0.1's CommOptions).
struct CommOptions {
  std::uint32_t tag = 0;
  std::optional<Seconds> timeout = {};  // none: wait as long as it takes
  bool wait_for_capacity = true;   // send: false fails at once with BackpressureError
  // send: complete only once the peer has read the whole message (a wcomm peer acknowledges
  // it; against a V0.1 peer, which cannot, the send completes when the kernel has it, as
  // without ack). A connection lost before the acknowledgement fails the send, so a message
  // the peer never got is never reported sent. Costs one small frame back per message.
  bool ack = false;
  Priority priority = Priority::kAuto;        // send: see Priority
  Compression compress = Compression::kAuto;  // send: see Compression
  // send: makes retrying safe after an unknown outcome (DeliveryUnknownError, or a sender
  // that restarted): a wcomm peer delivers one message per retry key from this node and
  // acknowledges a repeat of one it delivered without delivering it again. Choose a key per
  // message (a request id); the peer remembers the last 16384 keys it delivered from this
  // node, for its own life. A V0.1 peer cannot honour it: the send fails with
  // UnsupportedPayloadError. Such a send goes through the loop; a recv_into gets its tensors
  // by a copy.
  std::optional<std::uint64_t> retry_key = {};
};

struct SendResult {
  std::uint64_t message_id = 0;
  std::uint64_t wire_bytes = 0;  // the whole frame: header + manifest + segments
};

struct Received {
  Value value;
  Value piggypayload;  // None, or a Dict with string keys
  std::uint64_t message_id = 0;
  std::uint64_t wire_bytes = 0;
};

// What happened to a peer's session (Comm::on_peer_event).
struct PeerEvent {
  // kJoined: a peer entered the directory: add_peer (reason "added") or a node that dialed in
  // (CommConfig::accept_unknown_peers; reason "from <where>", and kUp follows).
  enum class Kind { kUp, kDown, kRestarted, kJoined };
  std::string node_id;
  Kind kind = Kind::kUp;
  std::string reason;  // why it went down or restarted ("" for up)
};
const char* peer_event_name(PeerEvent::Kind kind);  // "up", "down", "restarted", "joined"

// Everything Comm::create needs: local node, peers, bind host, CommConfig (config.h).
using CommSpec = NodeConfig;

// Counters, mostly for tests and benchmarks. bytes_copied counts payload bytes wcomm copied
// in user space (0 for tensors and bytes sent and received through the normal paths).
// How one peer is reached now (CommStats::peers).
struct PeerStats {
  bool connected = false;
  std::string transport;     // "shm", "unix", "tcp" or "ucx" while connected, else ""
  // How this side's large payloads travel: "cma" (the peer reads them straight from our
  // memory), "ring" (copied through shared memory: cross-memory attach was refused), or
  // "stream" (a socket); "" while not connected.
  std::string payload_path;
  // Recvs (recv, recv_into, recv_for) waiting on this peer now: posted, not yet completed.
  std::uint64_t recvs_waiting = 0;
};

struct CommStats {
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
  std::uint64_t wire_bytes_sent = 0;
  std::uint64_t wire_bytes_received = 0;
  std::uint64_t bytes_copied = 0;
  std::uint64_t connections_dialed = 0;
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_rejected = 0;
  // Messages read by the thread that was blocked in recv() for them (the receive fast path,
  // docs/thread-model.md), not by the loop thread. Included in messages_received.
  std::uint64_t messages_read_by_receivers = 0;
  std::uint64_t messages_read_busy_polling = 0;  // of those, read while busy polling
  // Errors no operation could be told of (a refused frame while nothing waited, when an
  // earlier such error was still unreported); each is also logged.
  std::uint64_t errors_without_waiter = 0;
  // Repeats of messages delivered already with the same retry key (CommOptions::retry_key),
  // dropped unread and acknowledged.
  std::uint64_t duplicates_dropped = 0;
  // Chunked frames ("chunks" feature): messages sent in chunks, and CHUNK frames written.
  std::uint64_t messages_chunked = 0;
  std::uint64_t chunks_sent = 0;
  // Adaptive compression ("zstd" feature): payload bytes that went through the compressor
  // and what they became on the wire (bytes saved = in - out, counting chunks sent
  // compressed only), time spent compressing, and bytes this side decompressed.
  std::uint64_t compression_bytes_in = 0;
  std::uint64_t compression_bytes_out = 0;
  double compression_seconds = 0;
  std::uint64_t bytes_decompressed = 0;
  std::map<std::string, PeerStats> peers;  // by node_id
};

// Thread-safe. Every operation returns a Future; its callbacks run on the Comm's loop thread
// (see docs/thread-model.md). Destroying the Comm closes it.
class Comm {
 public:
  // Binds the listening socket and starts the loop thread. Throws ConnectionFailedError when
  // the address cannot be bound, InvalidArgumentError for a bad spec or config.
  static std::shared_ptr<Comm> create(CommSpec spec);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  const Peer& local() const;  // with the addresses and port actually bound
  std::uint16_t port() const;  // the TCP port actually bound (0 for a node without TCP)
  std::vector<Address> addresses() const;  // every address listened on, as bound
  // The configured peer with that node_id; throws std::out_of_range for an unknown name or
  // the local node's own.
  const Peer& peer(std::string_view node_id) const;
  std::vector<Peer> peers() const;  // the peers now, in node_id order

  // Peers that join and leave at run time (any thread). add_peer checks the peer as create
  // does (InvalidArgumentError; one with that node_id there already is refused) and returns
  // the directory's own copy; the peer must list this node too for it to answer. remove_peer
  // takes it out: its pending sends and recvs fail with ClosedError "peer '<id>' was removed:
  // <reason>", its connections end (the peer sees them lost), a connection it makes later is
  // refused, and an operation that names it fails as for an unknown peer. The Peer& that
  // peer() returned stays valid. False: no such peer. Adding it again starts afresh (the
  // remote is a new session: a restarted process, or the same one back).
  const Peer& add_peer(Peer peer);
  bool remove_peer(std::string_view node_id, const std::string& reason = {});

  // Queues value for peer on options.tag. Tensors and bytes are sent from their own memory:
  // borrowed memory must stay valid and unmodified until the Future is ready. Waits for queue
  // capacity unless options.wait_for_capacity is false (then BackpressureError); a message
  // larger than max_peer_queued_bytes fails at once with MessageTooLargeError. A timeout or
  // cancel removes a queued message; one already being written aborts its connection.
  Future<SendResult> send(Value value, const Peer& peer, Value piggypayload = {}, CommOptions options = {});

  // The next message from peer on options.tag (FIFO per peer and tag; other tags keep their
  // order). A timeout or cancel loses nothing: a later message goes to the next recv.
  Future<Received> recv(const Peer& peer, CommOptions options = {});

  // Like recv, but tensor segments of the message are read straight into `into` (in the
  // order the message's tensors appear; each must match dtype and shape, else the recv fails
  // with UnsupportedPayloadError and the message is dropped with that error). A message that
  // had already arrived is copied into them (counted in stats().bytes_copied).
  Future<Received> recv_into(const Peer& peer, std::vector<Tensor> into, CommOptions options = {});

  // A recv whose calling thread first waits up to `wait` for the message itself: what
  // recv(peer, options) and then wait_for(wait) on its Future give, with less work. A message
  // already queued, or read by this thread within the wait, comes back in a ready Future with
  // no promise or waiter made for it (the lowest-latency receive; recv_busy_poll_us applies).
  // Otherwise the recv goes on as recv() would, first in line on its tag, and its Future
  // completes later. This thread reads the connection itself where it can; where it cannot
  // (not connected yet, another thread reads it, or recvs on this tag wait already) it waits
  // as wait_for does. A wait too long for the clock (inf) has no end (deadline.h); options.timeout
  // applies as to recv.
  Future<Received> recv_for(const Peer& peer, Seconds wait, CommOptions options = {});

  // Waits until one of recvs (Futures of this Comm's recv or recv_into) is ready, fd (if >= 0;
  // not consumed) is readable, or timeout passes (none: no limit). Returns the index of the
  // first ready recv, or nullopt. As a thread blocked in one recv does, the calling thread
  // reads those recvs' connections itself where it can (the receive fast path, with
  // recv_busy_poll_us), so an arriving message wakes it alone, not the loop thread and then
  // it. For a thread serving several peers. InvalidArgumentError for a Future of anything
  // else, or for nothing to wait for (no recvs, fd or timeout).
  std::optional<std::size_t> wait_any(std::span<const Future<Received>> recvs, std::optional<Seconds> timeout = {},
                                      int fd = -1);

  // Ends every connection to peer now, as a lost connection ends: a frame being written on
  // one fails its send (as do sends written there that await their ACK), and a frame being
  // read on one into a recv_into fails that recv, with ConnectionClosedError saying `reason`;
  // neither touches its memory afterwards. Sends not yet started and recvs nothing is being
  // read into are kept for the next connection (the next send dials one; the peer sees its
  // connection lost). Returns at once: the loop does it. For a caller that gave up on a
  // transfer that does not end (a failed collective call whose peer stalls mid-frame).
  void drop_connections(const Peer& peer, const std::string& reason);

  // Types the codec accepts for Record and Custom values (both directions).
  void register_record(const std::string& type_id, std::uint32_t version = 1);
  void register_custom(const std::string& type_id, std::uint32_t version = 1);

  // Storage for received tensors and bytes (default: Buffer::allocate). Set before traffic.
  void set_allocator(BufferAllocator allocator);

  CommStats stats() const;

  // Calls handler on the loop thread whenever a peer's session comes up (its first
  // connection is established), goes down (its last connection ended; the reason says why),
  // or the peer restarted (a wcomm peer came back as a new incarnation: what was in flight
  // with the old one failed with PeerRestartedError), or a peer joined the directory
  // (add_peer, or a node that dialed in with CommConfig::accept_unknown_peers). One handler;
  // set it before traffic.
  void on_peer_event(std::function<void(const PeerEvent&)> handler);
  // More handlers, for parts layered on a Comm (the transfer engine arms its receives for
  // each peer that joins): each runs on the loop thread after on_peer_event's, until
  // unwatched. Any thread; one call may still be running when unwatch returns on another.
  std::uint64_t watch_peer_events(std::function<void(const PeerEvent&)> handler);
  void unwatch_peer_events(std::uint64_t id);

  // Fails every pending operation with ClosedError, sends CLOSE on open connections, stops
  // the loop. Idempotent; must not be called from a callback on the loop thread.
  void close();

  struct Impl;

 private:
  explicit Comm(std::shared_ptr<Impl> impl);
  std::map<std::string, PeerStats> peer_stats() const;
  std::shared_ptr<Impl> impl_;
};

}  // namespace wcomm
