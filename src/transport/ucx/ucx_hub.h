// The ucx transport's shared machinery: one UCP worker per process (while any ucx connection
// or listener lives) driven by one progress thread, and each connection's Channel, the state
// that thread shares with the connection's loop and reader threads.
//
// Data path: UCP active messages (ucp_am_send_nbx). Each write is one message whose header
// carries a sequence number and whose body is the caller's gather buffers (IOV datatype, no
// copy: large ones go by rendezvous, i.e. RDMA where there is RDMA). Messages give the
// stream an in-band end (an END message after the last byte, acknowledged before the
// endpoint closes): a peer's close is then an eof after every byte it wrote, which UCP's
// stream API, with its endpoint's close racing its last bytes, could not promise.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>
#include <ucp/api/ucp.h>

#include "transport/transport.h"
#include "ucx/progress_loop.h"
#include "ucx/ucp_worker.h"

namespace wcomm::transport::ucx {

using ucp::status_text;
using ucp::UcpWorker;

enum class Kind : std::uint8_t { kHello = 1, kData = 2, kEnd = 3, kEndAck = 4, kCredit = 5 };

// The active message's header.
struct Header {
  std::uint64_t seq = 0;  // kData and kEnd: the stream's order; kCredit: bytes read so far
  Kind kind = Kind::kData;
};

// Flow control, as TCP's window: a sender starts a write only while fewer than kWindow bytes
// it sent are unread by the peer (a larger write may then go whole); the reader reports what
// it has read every kCreditStep bytes. A reader that stops reading (Comm's inbound bound)
// thus stops its peer's writes instead of being sent bytes without limit. About a loopback
// TCP socket's buffers: what a connection that fails may lose, as TCP's would.
constexpr std::uint64_t kWindow = 2u << 20;
constexpr std::uint64_t kCreditStep = 256u << 10;

class Hub;
struct ListenerState;  // ucx_transport.cpp

// One connection's state. Fields marked (hub) are guarded by Hub::mu, (rx) by rx_mu.
class Channel : public std::enable_shared_from_this<Channel> {
 public:
  explicit Channel(asio::any_io_executor executor);
  ~Channel();

  const asio::any_io_executor executor;
  ucp_ep_h ep = nullptr;  // (hub) null once closed
  Hub* hub = nullptr;     // (hub) set by Hub::attach

  // Writing (hub).
  std::uint64_t tx_seq = 0;
  int user_writes_in_flight = 0;  // sends still reading the caller's memory
  bool end_sent = false;
  bool end_acked = false;
  Clock::time_point linger_deadline{};
  std::uint64_t tx_bytes = 0;       // data bytes sent
  std::uint64_t peer_read = 0;      // of which the peer has read (its last credit)
  std::uint64_t credited = 0;       // what our last credit told the peer we read
  std::deque<std::unique_ptr<struct SendOp>> blocked;  // async_writes waiting for the window
  bool window_open() const { return blocked.empty() && tx_bytes - peer_read < kWindow; }
  // Dialing (hub): runs once, with the outcome, when the first message or an error arrives.
  std::function<void(std::error_code)> on_connected;

  // Reading: any thread, under rx_mu.
  std::size_t read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip, bool consume,
                   std::error_code& ec);
  bool readable();              // bytes, the end or a failure waiting
  int readable_fd() const { return readable_fd_; }  // an eventfd, readable while readable()
  void mark_shut();             // this side shut it: reads fail, waiters wake
  // Progress thread (hub and then rx taken inside): what arrives.
  void deliver(std::uint64_t seq, std::unique_ptr<std::uint8_t[]> bytes, std::size_t size, bool ready, bool end);
  std::uint8_t* pending_buffer(std::uint64_t seq);  // a rendezvous entry's storage
  void arrived(std::uint64_t seq);                  // a rendezvous entry's bytes are in place
  void fail(std::error_code ec);                    // the endpoint failed (sticky)
  std::error_code failure();
  bool end_reached();  // every byte before the peer's END has arrived (ack it)
  bool end_ack_sent = false;  // (hub)
  std::uint64_t bytes_read() const { return read_total_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    std::unique_ptr<std::uint8_t[]> bytes;
    std::size_t size = 0, offset = 0;
    bool ready = false, end = false;
  };
  void update_signal();  // rx held

  std::mutex rx_mu_;
  std::map<std::uint64_t, Entry> rx_;
  std::uint64_t rx_next_ = 0;
  bool at_end_ = false;
  bool end_arrived_ = false;  // the peer's END is among rx_ (or was read)
  bool shut_ = false;
  std::error_code failure_;
  bool signalled_ = false;
  int readable_fd_ = -1;
  std::atomic<std::uint64_t> read_total_{0};  // bytes consumed by read (credits report it)
};

// A send in flight: owns what UCX reads until it completes.
struct SendOp {
  std::shared_ptr<Channel> channel;
  Hub* hub = nullptr;
  Header header;
  std::vector<ucp_dt_iov_t> iov;
  std::unique_ptr<std::uint8_t[]> copy;  // try_write's own copy of the caller's bytes
  std::size_t bytes = 0;
  bool user_memory = false;  // iov points into the caller's memory (async_write)
  bool window_passed = false;  // let go by the window after waiting
  IoHandler handler;         // posted to the channel's executor on completion (may be empty)
  std::atomic<bool> completed{false};
};

// Hub::mu: a mutex the progress thread lets others have first. That thread takes it again
// right after letting go while UCX has work (a stream of arriving messages), and a plain
// std::mutex then starves the other threads that want it: a reader's loop writing a
// heartbeat or a credit-blocked writer waited seconds under CPU load, the connection stalled
// both ways and Comm declared the peer dead. Other threads count themselves while they wait;
// the progress thread, having let go, waits (bounded) until they have had their turn.
class HubMutex {
 public:
  void lock() {
    waiting_.fetch_add(1, std::memory_order_acq_rel);
    mu_.lock();
    waiting_.fetch_sub(1, std::memory_order_acq_rel);
  }
  bool try_lock() { return mu_.try_lock(); }
  void unlock() { mu_.unlock(); }
  // The progress thread's own lock: not counted.
  void lock_uncounted() { mu_.lock(); }
  // After unlock: lets the threads waiting for it take it first (at most `limit`).
  void let_waiters_in(std::chrono::microseconds limit) {
    if (waiting_.load(std::memory_order_acquire) == 0) return;  // the usual case: no clock read
    const auto start = std::chrono::steady_clock::now();
    while (waiting_.load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() - start < limit)
      std::this_thread::yield();
  }

 private:
  std::mutex mu_;
  std::atomic<int> waiting_{0};
};

class Hub {
 public:
  // The process's hub, started on first use; nullptr with `error` saying why UCX cannot run.
  static std::shared_ptr<Hub> get(std::string& error);
  ~Hub();

  HubMutex mu;  // serialises every call on the worker and the (hub) fields
  ucp_worker_h worker() const { return ucx_.worker(); }
  void wake() { loop_->wake(); }  // after posting work: the progress thread makes progress on it

  // The rest: mu held.
  void attach(const std::shared_ptr<Channel>& channel);  // after ep is made
  // Sends one message; completes op (handler posted) at once when UCX did. False if the
  // endpoint cannot send (failed or closed): op is completed with the error.
  void send(std::unique_ptr<SendOp> op);
  void send_control(Channel& channel, Kind kind, std::uint64_t value = 0);
  // Begins a tidy end: END now, the endpoint closes once the peer acknowledges it (or after
  // a bounded linger). Falls back to close_now while the caller's memory is in use.
  void end_gracefully(Channel& channel);
  // Fails the channel's writes waiting for the window (ec: why).
  void fail_blocked(Channel& channel, std::error_code ec);
  // Closes the endpoint at once, waiting (bounded) until UCX has finished with every request.
  void close_now(Channel& channel);
  static void complete(SendOp& op, std::error_code ec);
  // Closes the endpoint (forced) from the progress loop: for code inside UCX's callbacks.
  void close_later(const std::shared_ptr<Channel>& channel);
  // Runs fn on the progress thread, mu held, once `when` has passed (within about 10 ms), or
  // as the hub ends (after its connections, just before its worker), whichever comes first.
  void run_at(Clock::time_point when, std::function<void()> fn);
  // Closed listeners still refusing requests, by address (mu held; ucx_transport.cpp, kRetireFor).
  std::map<std::string, std::shared_ptr<ListenerState>> retired_listeners;

  // The error handler every endpoint of a Channel gets (arg: the Channel).
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);

 private:
  Hub();
  ucp::ProgressLoop::Round round();  // the progress thread's
  void begin_close(Channel& channel, bool force);
  void reap();  // closes that finished; lingerers whose time is up
  void run_due(Clock::time_point now);  // run_at's tasks due by now
  static ucs_status_t on_message(void* arg, const void* header, std::size_t header_length, void* data,
                                 std::size_t length, const ucp_am_recv_param_t* param);
  void on_end_progress(Channel& channel);

  // Channels whose endpoints had not closed when the hub ended: they go after the worker.
  std::vector<std::shared_ptr<Channel>> keep_until_worker_gone_;
  UcpWorker ucx_;
  std::atomic<int> in_flight_{0};  // requests that need progress without an fd event
  std::map<ucp_ep_h, std::shared_ptr<Channel>> channels_;
  std::vector<std::shared_ptr<Channel>> lingering_;
  struct Closing {
    void* request;
    std::shared_ptr<Channel> channel;
  };
  std::vector<Closing> closing_;
  std::vector<std::weak_ptr<Channel>> to_ack_;   // the peer's END reached: acknowledge it
  std::vector<std::shared_ptr<Channel>> to_close_;
  std::multimap<Clock::time_point, std::function<void()>> timed_;  // run_at's
  std::optional<ucp::ProgressLoop> loop_;  // (made once the worker is)
};

// Loop: the sockaddr for host:port (a numeric address, or a name resolved now); false with
// error set if it cannot be resolved.
bool resolve(const std::string& host, std::uint16_t port, sockaddr_storage& out, socklen_t& len, std::string& error);
std::string sockaddr_text(const sockaddr_storage& addr);

}  // namespace wcomm::transport::ucx
