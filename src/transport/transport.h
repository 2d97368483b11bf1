// The transport seam: what Comm needs of a way to move bytes, in the spirit of tensorpipe's
// context / listener / connection. A transport moves bytes and nothing else: framing and the
// codec live above it, in comm. A new transport is one folder (src/transport/NAME/) plus one
// line in registry.cpp; tests/integration/transport_conformance_test.cpp then runs it.
#pragma once

#include <atomic>
#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <asio.hpp>

#include "wcomm/address.h"

namespace wcomm::detail {
class Waker;
}

namespace wcomm::transport {

using Clock = std::chrono::steady_clock;
using IoHandler = std::function<void(std::error_code, std::size_t)>;

// The wake-up a thread waiting in Connection::wait_readable can be given from elsewhere.
class ThreadWaker;

// One connected, full-duplex byte stream. Loop-thread calls are marked; the try_* calls and
// wait_readable may be made from any thread, by one reader (and one writer) at a time.
class Connection {
 public:
  virtual ~Connection() = default;

  // Loop: writes every byte of buffers as one gather write (or fails). One at a time.
  virtual void async_write(std::vector<asio::const_buffer> buffers, IoHandler handler) = 0;
  // Non-blocking gather write with no async_write outstanding: writes what the transport
  // takes now and returns how many bytes that was (ec set on a broken connection).
  virtual std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) = 0;
  // Best-effort non-blocking write of a small frame (CLOSE) with nothing else outstanding.
  virtual void try_write_now(const void* data, std::size_t size) = 0;

  // Non-blocking scatter read into the caller's storage: fills buffers, skipping their first
  // `skip` bytes, with what has arrived, and returns how many bytes that was. ec is
  // asio::error::eof at the end of the stream.
  virtual std::size_t try_read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip,
                               std::error_code& ec) = 0;
  // Copies up to size bytes that have arrived without consuming them (ec as for try_read).
  virtual std::size_t try_peek(void* data, std::size_t size, std::error_code& ec) = 0;
  // The reader, between reads while it busy-polls: false only if a read would find nothing
  // (no bytes, no end of the stream), known without a lock or a system call. A transport
  // that cannot tell so cheaply says true, and the read finds out.
  virtual bool maybe_readable() const { return true; }

  // What this connection is, for the choices comm makes about it (comm never parses
  // describe()). Fixed for the connection's life.
  struct Traits {
    std::string_view name;  // "tcp", "tls", "unix", "shm", "ucx": for stats and logs only
    // Its bytes never leave this machine (unix, shm): such a link moves a chunk in
    // microseconds, so small chunks buy no responsiveness there (comm's chunk size).
    bool same_host = false;
    // A plain network socket whose writes drain at the link's rate: the writer may measure
    // that rate and compress chunks when the link is slower than the compressor (tcp; not
    // tls, where compression before encryption would reveal the content by its length).
    bool measures_link = false;
    // Whether the frame reader should read ahead: take what has arrived, up to a few KiB, in
    // one read and cut frames from it (a socket: one system call for several small frames),
    // rather than read each frame's parts where they go.
    bool reads_ahead = false;
    // Whether a peek at the next frame's head is cheaper than reading header and manifest one
    // by one (frame_reader.cpp): false where a peek's cost grows with what is queued.
    bool cheap_peek = true;
  };
  virtual Traits traits() const = 0;
  // The host the peer connects from, for the bound on handshakes per source: the remote
  // address without its port; empty for a same-host transport (one source: this host).
  virtual std::string peer_host() const { return {}; }

  // Loop: calls handler once bytes have arrived, or the stream ended or failed (at once if
  // bytes are waiting). Consumes nothing.
  virtual void async_wait_readable(std::function<void(std::error_code)> handler) = 0;
  // Loop: cancels async_wait_readable (its handler sees operation_aborted) and stops
  // watching, so arriving bytes do not wake the loop while another thread reads them.
  virtual void stop_waiting_readable() = 0;

  enum class Wait { kReadable, kWoken, kDeadline };
  // Any thread: sleeps until bytes have arrived (or the stream ended or failed: kReadable,
  // the next read says which), waker is woken (kWoken), or the deadline passes. Built on
  // prepare_wait and finish_wait.
  Wait wait_readable(Clock::time_point deadline, ThreadWaker& waker);

  // Any thread, the reader, for a thread about to sleep until bytes arrive, maybe on several
  // connections and other descriptors at once (ReadOwner::read_any): kReadable if bytes (or
  // the stream's end) can be read now; else kPolling, having added to fds what to poll for
  // this connection's bytes. After a kPolling, finish_wait gets those entries back once the
  // poll has returned, whatever it found (shared memory counts its sleeper out there).
  enum class Prepared { kReadable, kPolling };
  virtual Prepared prepare_wait(std::vector<pollfd>& fds) = 0;
  virtual void finish_wait(std::span<const pollfd> /*mine*/) {}

  // Loop: cancels outstanding operations (operation_aborted) and ends sending (the peer drops
  // a frame cut short), but what a thread reading the connection uses stays until close()
  // or close_gracefully(). Unless keep_receiving, the peer's further bytes are refused too
  // (a socket's SHUT_RD: the kernel resets a connection whose peer sends on), so no frame
  // still on its way completes here; an end that is to linger keeps receiving. (Used while
  // a caller reads, which is woken by its own waker, not by this.)
  virtual void shutdown(bool keep_receiving) = 0;
  // Loop: ends the stream, cancels outstanding operations (operation_aborted), releases all.
  virtual void close() = 0;
  // Loop: the same, without losing what was handed over: the peer gets it all before the end,
  // if it reads within `linger` (a socket closes after the peer's end; lingering_close.h).
  // The loop runs until then. Transports whose handed-over bytes cannot be lost this way
  // (shared memory, UCX's acknowledged end) just close.
  virtual void close_gracefully(std::chrono::steady_clock::duration /*linger*/) { close(); }
  virtual std::string describe() const = 0;  // "tcp 127.0.0.1:40000 <-> 127.0.0.1:9000"
  // How this side's large payloads travel, for stats and logs: "stream" (a socket), or for
  // shm "cma" (read by the peer straight from our memory) or "ring" (copied through the ring).
  virtual std::string_view payload_path() const { return "stream"; }
  // Whether the authenticated peer may call itself node_id: for TLS, whether its certificate
  // names it (subject CN or a DNS SAN); nullopt if so, else why not. Streams that
  // authenticate nobody accept any name.
  virtual std::optional<std::string> peer_name_problem(std::string_view node_id) const { return std::nullopt; }

  // Bytes of async_write calls handed over beyond recall (in the kernel, or where the peer
  // reads them without this side's help), counted when that happens, before the write's
  // completion (which is posted) runs. A writer giving up on a write in between (a send's
  // timeout) tells by it whether its frame went out whole: then it was delivered, and must not
  // be reported failed. Asked on the loop after the stream was shut (a writer that gives up
  // shuts first, then asks), so a transport whose peer takes bytes out of this side's memory
  // can answer from shared state, with no window between "taken" and "counted" (shm).
  virtual std::uint64_t bytes_handed_over() const { return handed_over_.load(std::memory_order_acquire); }
  // What the kernel may hold of this connection's bytes while a bound keeps its path's queue
  // short (tcp_target_queue_delay_us, tcp/send_queue_bound.h; at least its 16 KiB floor);
  // 0: not bounded. Any thread.
  virtual std::uint64_t send_bound_bytes() const { return 0; }

 protected:
  void hand_over(std::uint64_t bytes) { handed_over_.fetch_add(bytes, std::memory_order_release); }

 private:
  std::atomic<std::uint64_t> handed_over_{0};
};

using AcceptHandler = std::function<void(std::error_code, std::unique_ptr<Connection>)>;
using DialHandler = std::function<void(std::error_code, std::unique_ptr<Connection>)>;

class Listener {
 public:
  virtual ~Listener() = default;
  // Where peers reach it (a tcp port 0 resolved to the port bound).
  virtual Address address() const = 0;
  // Loop: accepts connections until close(), calling handler for each.
  virtual void start(AcceptHandler handler) = 0;
  virtual void close() = 0;
};

class TlsContext;  // tls/tls_context.h

// Settings a transport may use; the others ignore them.
struct Options {
  // With a context, the tcp transport's connections are TLS 1.3 streams (tls/tls_stream.h).
  std::shared_ptr<const TlsContext> tls;
  bool tcp_nodelay = true;
  // TCP keepalive: probe an idle connection after this many seconds, then every
  // keepalive_interval_s, giving up after 3 unanswered probes (0: the system's defaults, off).
  int keepalive_idle_s = 0;
  int keepalive_interval_s = 0;
  // TCP_NOTSENT_LOWAT (0: the kernel's default): bounds the unsent bytes the kernel holds.
  int tcp_notsent_lowat_bytes = 0;
  // SO_MAX_PACING_RATE, bytes per second (0: unpaced).
  std::uint32_t tcp_max_pacing_rate_bytes_per_second = 0;
  // The queueing delay a TCP connection's own bytes may add on a path that queues
  // (tcp/send_queue_bound.h; 0: unbounded, the kernel's autotuning). TLS over TCP too.
  std::chrono::microseconds tcp_target_queue_delay{0};
};

// A dial in progress. cancel() ends it: its handler then runs with operation_aborted (loop).
class PendingDial {
 public:
  virtual ~PendingDial() = default;
  virtual void cancel() = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view scheme() const = 0;  // the address scheme it serves: "tcp", "unix"
  // Binds the address; throws ConnectionFailedError naming it when it cannot.
  virtual std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address,
                                           const Options& options) const = 0;
  // Connects once (no retry: the caller owns the retry policy). The handler runs on the
  // loop, never inline, with asio::error::timed_out once the deadline passes.
  virtual std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                            const Options& options, DialHandler handler) const = 0;
};

// The remote host of a description "<scheme> <local> <-> <remote host>:<port>" (the form the
// network transports write): for their peer_host().
std::string remote_host_of(std::string_view description);

// The transport serving an address's scheme (registry.cpp); nullptr if none does.
const Transport* find_transport(std::string_view scheme);
// find_transport(address.scheme)->listen / ->dial; ConnectionFailedError for an unknown scheme.
std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address, const Options& options);
std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                  const Options& options, DialHandler handler);

}  // namespace wcomm::transport
