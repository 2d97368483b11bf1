// Hub and Channel: the ucx transport's worker, its progress thread and each connection's
// received bytes.
#include "transport/ucx/ucx_hub.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

namespace wcomm::transport::ucx {
namespace {

constexpr auto kPollAfterWork = std::chrono::microseconds(200);
// How long a closed connection waits for the peer to acknowledge its END before the
// endpoint is closed anyway (the peer then sees a reset instead of an orderly end).
constexpr auto kLinger = std::chrono::seconds(2);

std::error_code error_for(ucs_status_t s) {
  if (s == UCS_ERR_CANCELED) return asio::error::operation_aborted;
  return asio::error::connection_reset;
}

// A rendezvous receive in flight.
struct RecvOp {
  Hub* hub;
  std::shared_ptr<Channel> channel;
  std::uint64_t seq;
};

}  // namespace

// ---- Channel ----------------------------------------------------------------------------------

Channel::Channel(asio::any_io_executor executor_)
    : executor(std::move(executor_)), readable_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

Channel::~Channel() {
  if (readable_fd_ >= 0) ::close(readable_fd_);
}

void Channel::update_signal() {
  auto front = rx_.begin();
  const bool readable = shut_ || failure_ || at_end_ ||
                        (front != rx_.end() && front->first == rx_next_ && front->second.ready);
  if (readable && !signalled_) {
    ::eventfd_write(readable_fd_, 1);
    signalled_ = true;
  } else if (!readable && signalled_) {
    eventfd_t ignored;
    ::eventfd_read(readable_fd_, &ignored);
    signalled_ = false;
  }
}

bool Channel::readable() {
  std::lock_guard lock(rx_mu_);
  return signalled_;
}

std::size_t Channel::read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip, bool consume,
                          std::error_code& ec) {
  std::lock_guard lock(rx_mu_);
  if (shut_) {
    ec = asio::error::operation_aborted;
    return 0;
  }
  std::size_t i = 0;
  while (i < buffers.size() && skip >= buffers[i].size()) skip -= buffers[i++].size();
  std::size_t offset = skip, total = 0;
  auto it = rx_.begin();
  std::uint64_t next = rx_next_;
  std::size_t entry_offset = it == rx_.end() ? 0 : it->second.offset;
  while (i < buffers.size() && it != rx_.end() && it->first == next && it->second.ready && !it->second.end) {
    Entry& e = it->second;
    const std::size_t n = std::min(e.size - entry_offset, buffers[i].size() - offset);
    std::memcpy(static_cast<std::uint8_t*>(buffers[i].data()) + offset, e.bytes.get() + entry_offset, n);
    total += n, offset += n, entry_offset += n;
    if (offset == buffers[i].size()) ++i, offset = 0;
    if (entry_offset == e.size) {
      if (consume) {
        it = rx_.erase(it);
        ++rx_next_;
      } else {
        ++it;
      }
      ++next;
      entry_offset = it == rx_.end() ? 0 : it->second.offset;
    } else if (consume) {
      e.offset = entry_offset;
    }
  }
  if (consume && total > 0) read_total_.fetch_add(total, std::memory_order_release);
  if (total == 0) {
    if (it != rx_.end() && it->first == next && it->second.end) {
      ec = asio::error::eof;
      if (consume) at_end_ = true;
    } else if (at_end_) {
      ec = asio::error::eof;
    } else if (failure_) {
      ec = failure_;
    }
  }
  update_signal();
  return total;
}

void Channel::mark_shut() {
  std::lock_guard lock(rx_mu_);
  shut_ = true;
  update_signal();
}

void Channel::deliver(std::uint64_t seq, std::unique_ptr<std::uint8_t[]> bytes, std::size_t size, bool ready,
                      bool end) {
  std::lock_guard lock(rx_mu_);
  Entry& e = rx_[seq];
  e.bytes = std::move(bytes);
  e.size = size;
  e.ready = ready;
  e.end = end;
  end_arrived_ |= end;
  update_signal();
}

std::uint8_t* Channel::pending_buffer(std::uint64_t seq) {
  std::lock_guard lock(rx_mu_);
  auto it = rx_.find(seq);
  return it == rx_.end() ? nullptr : it->second.bytes.get();
}

void Channel::arrived(std::uint64_t seq) {
  std::lock_guard lock(rx_mu_);
  if (auto it = rx_.find(seq); it != rx_.end()) it->second.ready = true;
  update_signal();
}

void Channel::fail(std::error_code ec) {
  std::lock_guard lock(rx_mu_);
  if (!failure_) failure_ = ec;
  update_signal();
}

std::error_code Channel::failure() {
  std::lock_guard lock(rx_mu_);
  return failure_;
}

bool Channel::end_reached() {
  std::lock_guard lock(rx_mu_);
  // Called for every arriving message: without an END nothing to scan. (Scanning every
  // buffered message each time, under rx_mu_, made a slow reader's backlog quadratic and
  // starved its reads of the lock: the connection stalled until Comm's heartbeats ended it.)
  if (!end_arrived_) return at_end_;
  std::uint64_t next = rx_next_;
  for (auto it = rx_.find(next); it != rx_.end() && it->first == next && it->second.ready; ++it, ++next)
    if (it->second.end) return true;
  return at_end_;
}

// ---- Hub ----------------------------------------------------------------------------------------

std::shared_ptr<Hub> Hub::get(std::string& error) {
  static std::mutex mu;
  static std::weak_ptr<Hub> current;
  std::lock_guard lock(mu);
  if (auto hub = current.lock()) return hub;
  // Listeners reuse an address in TIME_WAIT, as the tcp transport's do (SO_REUSEADDR): a node
  // restarted at its address must be able to listen there again. UCX reads these settings
  // only from the environment, when its connection managers start; a user's own value stays.
  ::setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
  ::setenv("UCX_RDMA_CM_REUSEADDR", "y", 0);
  std::shared_ptr<Hub> hub(new Hub());
  if (!hub->ucx_.ok() || !hub->loop_) {
    error = "UCX cannot start: " + (hub->ucx_.ok() ? std::string("no active-message handler") : hub->ucx_.error());
    return nullptr;
  }
  current = hub;
  // UCX's client-server wire-up here goes through its tcp connection manager, which needs the
  // tcp transport among UCX_TLS (on RDMA hardware rdmacm does it instead).
  static const bool warned = [] {
    const char* tls = std::getenv("UCX_TLS");
    const std::string t = tls ? tls : "";
    if (!t.empty() && t.find("tcp") == std::string::npos && t.find("all") == std::string::npos && t[0] != '^' &&
        t.find("rc") == std::string::npos && t.find("dc") == std::string::npos && t.find("ud") == std::string::npos)
      spdlog::warn("wcomm ucx: UCX_TLS='{}' has no tcp: ucx:// connections will be refused unless RDMA CM is "
                   "available (add tcp, e.g. UCX_TLS=sm,tcp; the data still takes shared memory on one host)",
                   t);
    return true;
  }();
  (void)warned;
  return hub;
}

Hub::Hub() : ucx_(UCP_FEATURE_AM) {
  if (!ucx_.ok()) return;
  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  am.id = 0;
  am.cb = &Hub::on_message;
  am.arg = this;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  if (ucs_status_t s = ucp_worker_set_am_recv_handler(ucx_.worker(), &am); s != UCS_OK) {
    spdlog::error("wcomm ucx: ucp_worker_set_am_recv_handler: {}", status_text(s));
    return;
  }
  loop_.emplace(ucx_, "wcomm-ucx", kPollAfterWork, [this] { return round(); }, [this] {
    mu.lock_uncounted();
    std::lock_guard lock(mu, std::adopt_lock);
    return ucp_worker_arm(ucx_.worker());
  });
  loop_->start();
}

Hub::~Hub() {
  if (loop_) loop_->stop();  // (holders are not on its thread)
  if (ucx_.worker()) {
    std::lock_guard lock(mu);
    // Connections that were ended wait for their peers' acknowledgements (bounded), then every
    // endpoint closes: tidily where the peer has everything, else forced.
    const auto start = std::chrono::steady_clock::now();
    const auto waited = [&](auto limit) { return std::chrono::steady_clock::now() - start > limit; };
    while (!lingering_.empty() && !waited(std::chrono::milliseconds(500))) {
      ucp_worker_progress(ucx_.worker());
      reap();
    }
    std::vector<std::shared_ptr<Channel>> open;
    for (auto& [ep, c] : channels_) open.push_back(c);
    for (auto& c : open) begin_close(*c, !c->end_acked);
    while (!closing_.empty() && !waited(std::chrono::milliseconds(1500))) {
      ucp_worker_progress(ucx_.worker());
      reap();
    }
    for (Closing& c : closing_) {
      ucp_request_free(c.request);  // UCX frees it when it completes, with the worker
      keep_until_worker_gone_.push_back(c.channel);
    }
    closing_.clear();
    // Retired listeners go last, just before the worker: UCX's async thread hands a connection
    // a listener accepted to that listener when its request arrives (kRetireFor in
    // ucx_transport.cpp), and a dial of this process may still be on its way until now.
    ucx_.settle();
    run_due(Clock::time_point::max());
  }
}

void Hub::attach(const std::shared_ptr<Channel>& channel) {
  channel->hub = this;
  channels_[channel->ep] = channel;
}

void Hub::complete(SendOp& op, std::error_code ec) {
  if (op.completed.exchange(true) || !op.handler) return;
  asio::post(op.channel->executor, [handler = std::move(op.handler), ec, bytes = op.bytes] { handler(ec, ec ? 0 : bytes); });
}

void Hub::send(std::unique_ptr<SendOp> op) {
  Channel& c = *op->channel;
  // After our END only control goes out (the peer's END may still need its acknowledgement).
  const bool stream = op->header.kind == Kind::kData || op->header.kind == Kind::kEnd;
  if (!c.ep || (c.end_sent && stream)) {
    const std::error_code failure = c.failure();
    complete(*op, failure ? failure : std::error_code(asio::error::broken_pipe));
    return;
  }
  op->hub = this;
  if (op->header.kind == Kind::kData && op->user_memory && !op->window_passed && !c.window_open()) {
    c.user_writes_in_flight += 1;  // the caller's memory stays in use until it goes
    c.blocked.push_back(std::move(op));
    return;
  }
  if (op->header.kind == Kind::kData) c.tx_bytes += op->bytes;
  if (op->header.kind == Kind::kData || op->header.kind == Kind::kEnd) op->header.seq = c.tx_seq++;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;  // the receiver learns which of its endpoints this came by
  p.cb.send = [](void* request, ucs_status_t status, void* user) {
    auto* o = static_cast<SendOp*>(user);
    ucp_request_free(request);
    o->hub->in_flight_.fetch_sub(1);
    if (o->user_memory) o->channel->user_writes_in_flight -= 1;
    complete(*o, status == UCS_OK ? std::error_code() : error_for(status));
    delete o;
  };
  p.user_data = op.get();
  const void* buffer = nullptr;
  std::size_t count = 0;
  if (!op->iov.empty()) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_iov();
    buffer = op->iov.data();
    count = op->iov.size();
  }
  ucs_status_ptr_t req = ucp_am_send_nbx(c.ep, 0, &op->header, sizeof op->header, buffer, count, &p);
  if (UCS_PTR_IS_PTR(req)) {
    in_flight_.fetch_add(1);
    if (op->user_memory) c.user_writes_in_flight += 1;
    (void)op.release();  // the callback deletes it
    return;
  }
  complete(*op, UCS_PTR_STATUS(req) == UCS_OK ? std::error_code() : error_for(UCS_PTR_STATUS(req)));
}

void Hub::send_control(Channel& channel, Kind kind, std::uint64_t value) {
  auto op = std::make_unique<SendOp>();
  op->channel = channel.shared_from_this();
  op->header.kind = kind;
  op->header.seq = value;
  send(std::move(op));
}

void Hub::fail_blocked(Channel& channel, std::error_code ec) {
  while (!channel.blocked.empty()) {
    std::unique_ptr<SendOp> op = std::move(channel.blocked.front());
    channel.blocked.pop_front();
    channel.user_writes_in_flight -= 1;
    complete(*op, ec);
  }
}

void Hub::end_gracefully(Channel& channel) {
  if (!channel.ep || channel.end_sent) return;
  if (channel.user_writes_in_flight > 0 || channel.failure()) return close_now(channel);
  send_control(channel, Kind::kEnd);
  channel.end_sent = true;
  channel.linger_deadline = Clock::now() + kLinger;
  lingering_.push_back(channel.shared_from_this());
}

void Hub::begin_close(Channel& channel, bool force) {
  if (!channel.ep) return;
  ucp_ep_h ep = std::exchange(channel.ep, nullptr);
  auto keep = channel.shared_from_this();
  channels_.erase(ep);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
  if (UCS_PTR_IS_PTR(req)) closing_.push_back({req, std::move(keep)});
}

void Hub::close_now(Channel& channel) {
  fail_blocked(channel, asio::error::operation_aborted);
  if (!channel.ep) return;
  auto keep = channel.shared_from_this();
  begin_close(channel, true);
  // Forced: outstanding requests complete (cancelled) while this progresses; bounded.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    bool pending = false;
    for (Closing& c : closing_) pending |= c.channel == keep && ucp_request_check_status(c.request) == UCS_INPROGRESS;
    if (!pending) break;
    ucp_worker_progress(ucx_.worker());
  }
  reap();
}

void Hub::reap() {
  for (auto it = closing_.begin(); it != closing_.end();) {
    if (ucp_request_check_status(it->request) == UCS_INPROGRESS) {
      ++it;
      continue;
    }
    ucp_request_free(it->request);
    it = closing_.erase(it);
  }
  const auto now = Clock::now();
  for (auto it = lingering_.begin(); it != lingering_.end();) {
    Channel& c = **it;
    const bool failed = static_cast<bool>(c.failure());
    if (c.end_acked || failed || now >= c.linger_deadline || !c.ep) {
      begin_close(c, !c.end_acked || failed);
      it = lingering_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& weak : to_ack_)
    if (auto c = weak.lock(); c && c->ep && !c->end_ack_sent) {
      c->end_ack_sent = true;
      send_control(*c, Kind::kEndAck);
    }
  to_ack_.clear();
  for (auto& c : to_close_) begin_close(*c, true);
  to_close_.clear();
  for (auto& [ep, c] : channels_) {
    // Credits for what was read; writes the window lets go now; a failed peer's waiting writes.
    if (const std::uint64_t read = c->bytes_read(); read - c->credited >= kCreditStep) {
      c->credited = read;
      send_control(*c, Kind::kCredit, read);
    }
    if (c->blocked.empty()) continue;
    if (std::error_code failure = c->failure()) {
      fail_blocked(*c, failure);
      continue;
    }
    while (!c->blocked.empty() && c->tx_bytes - c->peer_read < kWindow) {
      std::unique_ptr<SendOp> op = std::move(c->blocked.front());
      c->blocked.pop_front();
      c->user_writes_in_flight -= 1;
      op->window_passed = true;  // goes now, ahead of anything queued behind it
      send(std::move(op));
    }
  }
}

// Progress thread, Hub::mu held (inside ucp_worker_progress).
void Hub::on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* c = static_cast<Channel*>(arg);
  spdlog::debug("wcomm ucx: endpoint {} failed: {}", static_cast<void*>(ep), status_text(status));
  c->fail(status == UCS_ERR_CANCELED ? std::error_code(asio::error::operation_aborted)
                                     : std::error_code(asio::error::connection_reset));
  // A failed endpoint is closed at once (UCX wants it closed, forced), not when Comm gets to
  // it: the peer's endpoint then fails too, promptly, instead of only through Comm's
  // heartbeats while what is written to it goes nowhere.
  if (auto self = c->weak_from_this().lock(); self && self->ep == ep)
    if (self->hub) self->hub->close_later(self);
  if (auto connected = std::move(c->on_connected)) {
    c->on_connected = nullptr;
    connected(asio::error::connection_refused);
  }
}

ucs_status_t Hub::on_message(void* arg, const void* header, std::size_t header_length, void* data, std::size_t length,
                             const ucp_am_recv_param_t* param) {
  auto* hub = static_cast<Hub*>(arg);
  if (header_length != sizeof(Header) || !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) return UCS_OK;
  Header h;
  std::memcpy(&h, header, sizeof h);
  auto found = hub->channels_.find(param->reply_ep);
  if (found == hub->channels_.end()) return UCS_OK;  // its connection is closing: nobody reads it
  std::shared_ptr<Channel> c = found->second;
  if (auto connected = std::move(c->on_connected)) {
    c->on_connected = nullptr;
    connected({});
  }
  switch (h.kind) {
    case Kind::kHello: break;
    case Kind::kEndAck: c->end_acked = true; break;
    case Kind::kCredit: c->peer_read = std::max(c->peer_read, h.seq); break;
    case Kind::kEnd:
      c->deliver(h.seq, nullptr, 0, true, true);
      hub->on_end_progress(*c);
      break;
    case Kind::kData: {
      std::unique_ptr<std::uint8_t[]> bytes(new std::uint8_t[length ? length : 1]);
      if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        std::memcpy(bytes.get(), data, length);
        c->deliver(h.seq, std::move(bytes), length, true, false);
        hub->on_end_progress(*c);
        break;
      }
      std::uint8_t* buffer = bytes.get();
      c->deliver(h.seq, std::move(bytes), length, false, false);
      auto* op = new RecvOp{hub, c, h.seq};
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = [](void* request, ucs_status_t status, std::size_t, void* user) {
        auto* o = static_cast<RecvOp*>(user);
        ucp_request_free(request);
        o->hub->in_flight_.fetch_sub(1);
        if (status == UCS_OK) o->channel->arrived(o->seq);
        else o->channel->fail(error_for(status));
        o->hub->on_end_progress(*o->channel);
        delete o;
      };
      p.user_data = op;
      ucs_status_ptr_t req = ucp_am_recv_data_nbx(hub->ucx_.worker(), data, buffer, length, &p);
      if (UCS_PTR_IS_PTR(req)) {
        hub->in_flight_.fetch_add(1);
        break;
      }
      if (UCS_PTR_STATUS(req) == UCS_OK) c->arrived(h.seq);
      else c->fail(error_for(UCS_PTR_STATUS(req)));
      delete op;
      break;
    }
  }
  return UCS_OK;
}

void Hub::on_end_progress(Channel& channel) {
  // Acknowledged from the progress loop, not inside UCX's callback.
  if (channel.end_ack_sent || !channel.end_reached()) return;
  to_ack_.push_back(channel.weak_from_this());
  wake();  // (the loop may sleep until woken: work for it comes with a wake-up, from any thread)
}

void Hub::close_later(const std::shared_ptr<Channel>& channel) {
  to_close_.push_back(channel);
  wake();
}

void Hub::run_at(Clock::time_point when, std::function<void()> fn) {
  timed_.emplace(when, std::move(fn));
  wake();  // its sleep is bounded by the earliest task
}

void Hub::run_due(Clock::time_point now) {
  while (!timed_.empty() && timed_.begin()->first <= now) {
    auto fn = std::move(timed_.begin()->second);
    timed_.erase(timed_.begin());
    fn();
  }
}

ucp::ProgressLoop::Round Hub::round() {
  ucp::ProgressLoop::Round round;
  {
    mu.lock_uncounted();
    std::lock_guard lock(mu, std::adopt_lock);
    const unsigned progressed = ucp_worker_progress(ucx_.worker());
    const auto now = std::chrono::steady_clock::now();
    reap();
    run_due(now);
    round.busy = progressed > 0 || in_flight_.load() > 0;
    // Idle, it sleeps until an event, a wake() or its next deadline: lingering ends poll every
    // millisecond, a run_at task is run when due.
    if (!closing_.empty() || !lingering_.empty()) round.sleep_at_most = std::chrono::milliseconds(1);
    else if (!timed_.empty())
      round.sleep_at_most = std::chrono::ceil<std::chrono::milliseconds>(timed_.begin()->first - now) +
                            std::chrono::milliseconds(1);
  }
  mu.let_waiters_in(std::chrono::milliseconds(2));
  return round;
}

// ---- addresses ----------------------------------------------------------------------------------

bool resolve(const std::string& host, std::uint16_t port, sockaddr_storage& out, socklen_t& len, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host.empty() ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0 || !found) {
    error = "cannot resolve '" + host + "': " + ::gai_strerror(rc);
    return false;
  }
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  len = found->ai_addrlen;
  ::freeaddrinfo(found);
  return true;
}

std::string sockaddr_text(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    ::inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
    port = ntohs(a.sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    ::inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof host);
    port = ntohs(a.sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

}  // namespace wcomm::transport::ucx
