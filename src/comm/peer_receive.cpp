// PeerState's receive side: the tag-matched inbox, recv waiters, the inbound bound, and the
// caller's-thread paths (recv_from_caller, help_recv).
//
// inbox_, waiters_, the unreceived counters and unreported_error_ are shared with callers'
// threads under recv_mutex_. Promises are completed after it is released: a completion
// callback may call recv() again.
#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "comm/comm_impl.h"

namespace wcomm {

namespace {

// Copies an already received message's tensors into recv_into destinations.
std::optional<std::string> fill_into(Value& value, const std::vector<Tensor>& into, std::atomic<std::uint64_t>& copied) {
  std::size_t next = 0;
  std::optional<std::string> mismatch;
  std::function<void(Value&)> fill = [&](Value& v) {
    if (auto* t = std::get_if<Tensor>(&v.variant())) {
      if (next >= into.size()) { mismatch = "more tensors than recv_into was given"; return; }
      const Tensor& dst = into[next++];
      if (dst.dtype() != t->dtype() || dst.shape() != t->shape()) { mismatch = "a tensor's dtype or shape differs"; return; }
      std::memcpy(dst.data(), t->data(), t->nbytes());
      copied.fetch_add(t->nbytes(), std::memory_order_relaxed);
      *t = dst;
    } else if (auto* l = std::get_if<List>(&v.variant())) { for (auto& x : l->items) fill(x); }
    else if (auto* u = std::get_if<Tuple>(&v.variant())) { for (auto& x : u->items) fill(x); }
    else if (auto* d = std::get_if<Dict>(&v.variant())) { for (auto& [k, x] : d->items) { fill(k); fill(x); } }
  };
  fill(value);
  return mismatch;
}

}  // namespace

std::optional<Result<Received>> PeerState::take_queued_locked(std::uint32_t tag) {
  if (recv_closed_) return Result<Received>(Error{ErrorCode::kClosed, "the Comm is closed"});
  auto found = inbox_.find(tag);
  if (found != inbox_.end() && !found->second.empty()) {
    Result<Received> got = std::move(found->second.front());
    found->second.pop_front();
    if (got.ok()) {
      unreceived_messages_ -= 1;
      unreceived_bytes_ -= got.value().wire_bytes;
    }
    return got;
  }
  if (unreported_error_) {
    Error error = std::move(*unreported_error_);
    unreported_error_.reset();
    return Result<Received>(Error{error.code, "earlier, while nothing was waiting: " + error.message});
  }
  return std::nullopt;
}

void PeerState::finish_taken(RecvWaiter& waiter, Result<Received> result) {
  if (result.ok() && !waiter.into.empty()) {
    // Already received into fresh storage: copy into the caller's tensors.
    if (auto mismatch = fill_into(result.value().value, waiter.into, impl_.stats.bytes_copied))
      result = Error{ErrorCode::kUnsupportedPayload, "recv_into: " + *mismatch + "; the message was dropped"};
  }
  waiter.promise.complete(std::move(result));
  after_taken();
}

void PeerState::after_taken() {
  if (any_paused_.load(std::memory_order_acquire)) impl_.post([this] { resume_paused(); });
}

bool PeerState::recv_waiting_locked(std::uint32_t tag) const {
  auto found = waiters_.find(tag);
  return found != waiters_.end() && std::any_of(found->second.begin(), found->second.end(), [](auto& w) { return !w->done; });
}

void PeerState::recv_from_caller(const std::shared_ptr<RecvWaiter>& waiter, std::optional<Seconds> timeout) {
  // Caller's thread: a message that is already here is taken, or the waiter is parked, at
  // once and under the lock, whatever the recv. A connection lost after recv() returned then
  // fails it (parked later by the loop, it could come after the loss had been handled and
  // wait for a reconnect), and a recv without a timeout needs no hop to the loop (whose
  // wake-up would cost a context switch on every recv). A timeout adds only its timer there.
  const bool loop_parts = timeout.has_value();
  waiter->timed = loop_parts;
  if (!waiter->into.empty()) any_into_.store(true, std::memory_order_relaxed);
  std::optional<Result<Received>> taken;
  {
    std::lock_guard lock(recv_mutex_);
    taken = take_queued_locked(waiter->tag);
    if (taken) waiter->done = true;
    else waiters_[waiter->tag].push_back(waiter);
  }
  if (taken) return finish_taken(*waiter, std::move(*taken));
  if (!loop_parts) return;
  // The timer belongs to the loop.
  const Clock::time_point deadline = deadline_of(timeout);
  if (!impl_.post([this, waiter, deadline, timeout] { arm_recv(waiter, deadline, timeout); }))
    cancel_recv(waiter, Error{ErrorCode::kClosed, "the Comm is closed"});
}

Future<Received> PeerState::recv_for(std::uint32_t tag, Clock::time_point wait_until, std::optional<Seconds> timeout) {
  const Clock::time_point timeout_at = deadline_of(timeout);
  transport::ThreadWaker& waker = transport::this_thread_waker();
  DirectRecv direct;
  direct.tag = tag;
  direct.waker = &waker;
  std::shared_ptr<Connection> connection;
  std::optional<Result<Received>> taken;
  {
    std::lock_guard lock(recv_mutex_);
    taken = take_queued_locked(tag);
    if (!taken && !direct_ && waker.valid() && caller_read_connection_ && !recv_waiting_locked(tag)) {
      direct_ = &direct;
      connection = caller_read_connection_;
    }
  }
  if (taken) {
    after_taken();
    return ready_future(std::move(*taken), impl_.poster);
  }
  if (connection) {
    connection->read_for({nullptr, &direct.filled}, std::min(wait_until, timeout_at),
                         std::chrono::microseconds(impl_.spec.comm.recv_busy_poll_us));
    impl_.let_go(std::move(connection));
  }
  // (Made before the lock; the fast path, a filled slot, makes none.)
  std::shared_ptr<RecvWaiter> waiter =
      direct.filled.load(std::memory_order_acquire) ? nullptr : RecvWaiter::make(impl_.self.lock(), this, tag, {});
  {
    std::lock_guard lock(recv_mutex_);
    const bool first_in_line = direct_ == &direct;
    if (first_in_line) direct_ = nullptr;
    if (direct.filled.load(std::memory_order_relaxed)) taken = std::move(*direct.result);
    else if (!first_in_line) taken = take_queued_locked(tag);  // (first in line: nothing came)
    if (!taken && Clock::now() >= timeout_at) taken = Result<Received>(timeout_error("recv", peer_, *timeout));
    if (!taken) {
      waiter->timed = timeout.has_value();
      auto& queue = waiters_[tag];
      if (first_in_line) queue.push_front(waiter); else queue.push_back(waiter);
    }
  }
  if (taken) {
    after_taken();
    return ready_future(std::move(*taken), impl_.poster);
  }
  Future<Received> future = waiter->promise.future();
  if (timeout && !impl_.post([this, waiter, timeout_at, timeout] { arm_recv(waiter, timeout_at, timeout); }))
    cancel_recv(waiter, Error{ErrorCode::kClosed, "the Comm is closed"});
  return future;
}

void PeerState::fill_direct_locked(Result<Received>&& result) {
  direct_->result.emplace(std::move(result));
  direct_->filled.store(true, std::memory_order_release);
  direct_ = nullptr;
}

void PeerState::arm_recv(const std::shared_ptr<RecvWaiter>& waiter, Clock::time_point deadline,
                         std::optional<Seconds> timeout) {
  {
    std::lock_guard lock(recv_mutex_);
    if (waiter->done) return;
  }
  if (closing()) return cancel_recv(waiter, Error{ErrorCode::kClosed, "the Comm is closed"});
  if (timeout) {
    waiter->timer.emplace(impl_.io, deadline);
    waiter->timer->async_wait([this, weak = std::weak_ptr(waiter), timeout = *timeout](std::error_code ec) {
      auto w = weak.lock();
      if (!ec && w) cancel_recv(w, timeout_error("recv", peer_, timeout));
    });
  }
  // Nothing more: who reads for it is decided as for a recv without a timeout (the thread
  // that waits for it, or the loop once a callback is set or nobody stands down for a reader).
}

void PeerState::help_recv(const std::shared_ptr<RecvWaiter>& waiter, Clock::time_point deadline) {
  // A thread blocked on a parked recv reads the connection itself, so the kernel wakes it
  // when the message comes, instead of waking the loop to read it and then this thread.
  if (auto connection = connection_to_help(*waiter)) {
    connection->read_for({&waiter->promise}, deadline, std::chrono::microseconds(impl_.spec.comm.recv_busy_poll_us));
    impl_.let_go(std::move(connection));
  }
}

std::shared_ptr<Connection> PeerState::connection_to_help(const RecvWaiter& waiter) {
  std::lock_guard lock(recv_mutex_);
  return waiter.done ? nullptr : caller_read_connection_;
}

bool PeerState::recvs_waiting(std::size_t beyond) {
  std::lock_guard lock(recv_mutex_);
  std::size_t waiting = 0;
  for (const auto& [tag, waiters] : waiters_)
    for (const auto& w : waiters)
      if (!w->done && ++waiting > beyond) return true;
  return false;
}

void PeerState::refresh_caller_read() {
  std::lock_guard lock(recv_mutex_);
  caller_read_connection_ = connections_.size() == 1 && !closing() ? connections_.front() : nullptr;
}

void PeerState::read_soon() {
  for (const auto& connection : connections_) connection->read_soon();
}

bool PeerState::loop_stands_down() {
  std::lock_guard lock(recv_mutex_);
  return caller_read_connection_ && caller_read_connection_->standing_down();
}

void PeerState::cancel_recv(const std::shared_ptr<RecvWaiter>& waiter, Error error) {
  {
    std::lock_guard lock(recv_mutex_);
    // A waiter a frame is being read into completes with that frame (it owns the memory now).
    if (waiter->done || waiter->claimed) return;
    waiter->done = true;
    auto& queue = waiters_[waiter->tag];
    queue.erase(std::remove(queue.begin(), queue.end(), waiter), queue.end());
  }
  waiter->timer.reset();
  waiter->promise.complete(std::move(error));
}

std::shared_ptr<RecvWaiter> PeerState::claim_into_waiter(std::uint32_t tag) {
  // A recv_into posted as this frame arrives may be missed: deliver then copies into it.
  if (!any_into_.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard lock(recv_mutex_);
  if (direct_ && direct_->tag == tag) return nullptr;  // that frame is a recv_for's, which came first
  auto found = waiters_.find(tag);
  if (found == waiters_.end() || found->second.empty()) return nullptr;
  auto& front = found->second.front();
  if (front->into.empty() || front->done) return nullptr;
  front->claimed = true;
  return front;
}

void PeerState::unclaim_into_waiter(const std::shared_ptr<RecvWaiter>& waiter) {
  std::lock_guard lock(recv_mutex_);
  waiter->claimed = false;
}

std::shared_ptr<RecvWaiter> PeerState::route_refusal_locked(std::uint32_t tag, const Error& error) {
  if (direct_ && direct_->tag == tag) {
    transport::ThreadWaker* waker = direct_->waker;  // (the slot is let go of when filled)
    fill_direct_locked(error);
    waker->wake();
    return nullptr;
  }
  if (auto found = waiters_.find(tag); found != waiters_.end()) {
    auto& queue = found->second;
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if ((*it)->done || (*it)->claimed) continue;
      auto waiter = std::move(*it);
      queue.erase(it);
      waiter->done = true;
      return waiter;
    }
  }
  inbox_[tag].push_back(error);
  return nullptr;
}

bool PeerState::accept_from_locked(Connection& from, std::uint8_t flags) {
  if (from.superseded) return false;
  if (!(flags & kFlagSupersedes)) return true;
  for (Connection* old : reading_) {
    if (old == &from || old->superseded) continue;
    old->superseded = true;
    spdlog::info("wcomm[{}]: peer '{}' moved to {}: ending {}, whose frames still on their way are older",
                 impl_.spec.local.node_id, peer_.node_id, from.describe(), old->describe());
    impl_.post([weak = old->weak_from_this(), id = peer_.node_id] {
      if (auto c = weak.lock())
        c->fail({ErrorCode::kConnectionClosed, "superseded: peer '" + id + "' moved to another connection"}, true);
    });
  }
  return true;
}

bool PeerState::complete_into_waiter(Connection* from, std::uint8_t flags, const std::shared_ptr<RecvWaiter>& waiter,
                                     Result<Received> result, bool by_loop, Later& later) {
  bool accepted = true;
  {
    std::lock_guard lock(recv_mutex_);
    if (from && !accept_from_locked(*from, flags)) {
      accepted = false;
      result = Error{ErrorCode::kConnectionClosed, "the message being read into this recv_into came on a connection "
                                                   "its sender had left (superseded); it was dropped"};
    }
    auto& queue = waiters_[waiter->tag];
    queue.erase(std::remove(queue.begin(), queue.end(), waiter), queue.end());
    waiter->done = true;
  }
  complete_recv(waiter, std::move(result), by_loop, &later);
  return accepted;
}

bool PeerState::seen_retry_key_locked(std::uint64_t key) {
  if (!retry_keys_seen_.insert(key).second) return true;
  retry_key_order_.push_back(key);
  if (retry_key_order_.size() > kRetryKeyWindow) {
    retry_keys_seen_.erase(retry_key_order_.front());
    retry_key_order_.pop_front();
  }
  return false;
}

bool PeerState::deliver(Connection& from, std::uint8_t flags, std::uint32_t tag, Received&& message, bool by_loop,
                        Later& later, std::optional<std::uint64_t> retry_key) {
  std::shared_ptr<RecvWaiter> waiter;
  {
    std::lock_guard lock(recv_mutex_);
    if (!accept_from_locked(from, flags)) return false;
    // A repeat of a message delivered already (its sender retried after an unknown outcome):
    // dropped, and acknowledged so that the retry completes.
    if (retry_key && seen_retry_key_locked(*retry_key)) {
      impl_.stats.duplicates_dropped.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    // A recv_for reading in place came before every waiter on its tag. Whoever reads here
    // (its own thread, the loop it waited out, or another reader it could not displace),
    // its thread is not asleep on its waker: nobody to wake.
    if (direct_ && direct_->tag == tag) {
      fill_direct_locked(std::move(message));
      return true;
    }
    auto found = waiters_.find(tag);
    if (found != waiters_.end()) {
      auto& queue = found->second;
      while (!queue.empty() && !waiter) {
        auto next = std::move(queue.front());
        queue.pop_front();
        if (next->done) continue;
        next->done = true;
        waiter = std::move(next);
      }
    }
    if (!waiter) {
      unreceived_messages_ += 1;
      unreceived_bytes_ += message.wire_bytes;
      inbox_[tag].push_back(std::move(message));
      return true;
    }
  }
  Result<Received> result = std::move(message);
  if (!waiter->into.empty()) {
    // A recv_into that came after this frame's storage was chosen: copy into its tensors.
    if (auto mismatch = fill_into(result.value().value, waiter->into, impl_.stats.bytes_copied))
      result = Error{ErrorCode::kUnsupportedPayload, "recv_into: " + *mismatch + "; the message was dropped"};
  }
  complete_recv(std::move(waiter), std::move(result), by_loop, &later);
  return true;
}

// Called by a connection's reader, in arrival order. On the loop a waiter completes at once
// (its callback held in `later` until the reader lets go of the reading), unless completions
// a caller handed over are still pending: then behind them. On a caller's thread the result
// is set at once, but callbacks and timers belong to the loop: callbacks go there in order,
// and a timed waiter's timer is reset there (its handler finds the waiter done meanwhile).
void PeerState::complete_recv(std::shared_ptr<RecvWaiter> waiter, Result<Received>&& result, bool by_loop,
                              Later* later) {
  if (by_loop && deferred_completions_.load() == 0) {
    waiter->timer.reset();
    if (!later) return (void)waiter->promise.complete(std::move(result));
    waiter->promise.complete_deferring_callback(std::move(result),
                                                [later](std::function<void()> fn) { later->push_back(std::move(fn)); });
  } else if (by_loop) {
    post_in_order([waiter, result = std::move(result)]() mutable {
      waiter->timer.reset();
      waiter->promise.complete(std::move(result));
    });
  } else {
    waiter->promise.complete_deferring_callback(std::move(result),
                                                [this](std::function<void()> fn) { post_in_order(std::move(fn)); });
    if (waiter->timed) impl_.post([waiter] { waiter->timer.reset(); });
  }
}

void PeerState::post_in_order(std::function<void()> fn) {
  deferred_completions_.fetch_add(1);
  auto run = [this, fn = std::move(fn)] {
    fn();
    deferred_completions_.fetch_sub(1);
  };
  if (!impl_.post(run)) run();  // the loop has finished (closed): complete here
}

bool PeerState::inbound_full_locked() const {
  const CommConfig& c = impl_.spec.comm;
  return unreceived_messages_ >= c.max_peer_unreceived_messages ||
         unreceived_bytes_ + partial_bytes_.load() >= c.max_peer_unreceived_bytes;
}

bool PeerState::pause_if_full(Connection& connection) {
  std::lock_guard lock(recv_mutex_);
  if (!inbound_full_locked()) return false;
  paused_.push_back(connection.shared_from_this());  // (only now: this runs before every frame)
  any_paused_.store(true);
  // A release of partial bytes that came after the look above, and before any_paused_ was
  // set, saw nothing paused (see release_partial): look again for it.
  if (!inbound_full_locked()) impl_.post([this] { resume_paused(); });
  return true;
}

// Frames being read count against the bound (their storage is allocated); no lock: every
// frame charges and releases.
void PeerState::charge_partial(std::uint64_t bytes) { partial_bytes_.fetch_add(bytes); }

void PeerState::release_partial(std::uint64_t bytes) {
  if (bytes == 0) return;
  partial_bytes_.fetch_sub(bytes);
  if (any_paused_.load()) impl_.post([this] { resume_paused(); });
}

void PeerState::resume_paused() {
  std::vector<std::shared_ptr<Connection>> paused;
  {
    std::lock_guard lock(recv_mutex_);
    if (paused_.empty() || inbound_full_locked()) return;
    paused = std::move(paused_);
    paused_.clear();
    any_paused_.store(false, std::memory_order_release);
  }
  for (auto& connection : paused) connection->resume_reading();
}

std::vector<std::shared_ptr<RecvWaiter>> PeerState::take_waiters_locked(const Error& error) {
  if (direct_) {
    transport::ThreadWaker* waker = direct_->waker;  // (the slot is let go of when filled)
    fill_direct_locked(error);
    waker->wake();  // it may sleep in its read
  }
  std::vector<std::shared_ptr<RecvWaiter>> out;
  for (auto& [tag, queue] : waiters_) {
    for (auto& w : queue)
      if (!w->done && !w->claimed) {
        w->done = true;
        out.push_back(w);
      }
    std::erase_if(queue, [](auto& w) { return w->done; });
  }
  return out;
}

}  // namespace wcomm
