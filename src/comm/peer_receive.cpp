// PeerState's receive side: recvs from callers' threads (recv_from_caller, recv_for,
// help_recv), delivery of what the readers bring, completions, the inbound bound, and what a
// connection's end, a restart or close does to the recvs. The state
// they share with callers' threads is the Inbox's (inbox.h), under its lock; promises are
// completed after it is let go: a completion callback may call recv() again.
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

PeerState::PeerState(Comm::Impl& impl, Peer peer)
    : impl_(impl),
      peer_(std::move(peer)),
      session_(impl, *this),
      outbox_(impl, *this),
      inbox_(impl.spec.comm),
      deadline_timer_(impl.io, [this] { return expire_due(); }) {}

void PeerState::finish_taken(RecvWaiter& waiter, Result<Received> result) {
  if (result.ok() && !waiter.into.empty()) {
    // Already received into fresh storage: copy into the caller's tensors.
    if (auto mismatch = fill_into(result.value().value, waiter.into, impl_.stats.bytes_copied))
      result = Error{ErrorCode::kUnsupportedPayload, "recv_into: " + *mismatch + "; the message was dropped"};
  }
  waiter.promise->complete(std::move(result));
  after_taken();
}

void PeerState::after_taken() {
  if (inbox_.any_paused()) impl_.post([this] { resume_paused(); });
}

void PeerState::recv_from_caller(const std::shared_ptr<RecvWaiter>& waiter, std::optional<Seconds> timeout) {
  // Caller's thread: a message that is already here is taken, or the waiter is parked, at
  // once and under the lock, whatever the recv. A connection lost after recv() returned then
  // fails it (parked later by the loop, it could come after the loss had been handled and
  // wait for a reconnect), and a recv without a timeout needs no hop to the loop (whose
  // wake-up would cost a context switch on every recv). A timeout is data: the peer's timer
  // is posted to only when this deadline comes before the one it is armed for.
  waiter->timeout = timeout;
  waiter->deadline = deadline_of(timeout);
  if (!waiter->into.empty()) inbox_.note_recv_into();
  std::optional<Result<Received>> taken;
  bool arm = false;
  {
    auto in = inbox_.lock();
    taken = in.take(waiter->tag);
    if (taken) waiter->done = true;
    else arm = in.park(waiter);
  }
  if (taken) return finish_taken(*waiter, std::move(*taken));
  if (arm) rearm_for(waiter);
}

void PeerState::rearm_for(const std::shared_ptr<RecvWaiter>& waiter) {
  if (!impl_.post([this, at = waiter->deadline] { arm_deadline_timer(at); }))
    cancel_recv(waiter, Error{ErrorCode::kClosed, "the Comm is closed"});
}

void PeerState::arm_deadline_timer(Clock::time_point at) { deadline_timer_.arm_for(at); }

// (Never while closing: close_all stops the timer before it fails everything.)
Clock::time_point PeerState::expire_due() {
  const Clock::time_point next_send = outbox_.expire_due_sends();
  Clock::time_point next_recv;
  std::vector<std::shared_ptr<RecvWaiter>> due = inbox_.lock().take_due(Clock::now(), next_recv);
  for (auto& w : due) complete_recv(w, timeout_error("recv", peer_, *w->timeout), /*by_loop=*/true, nullptr);
  return std::min(next_send, next_recv);
}

Future<Received> PeerState::recv_for(std::uint32_t tag, Clock::time_point wait_until, std::optional<Seconds> timeout) {
  const Clock::time_point timeout_at = deadline_of(timeout);
  transport::ThreadWaker& waker = transport::this_thread_waker();
  RecvSlot slot;
  slot.waker = &waker;
  RecvWaiter own;  // parked while this thread reads for it: out of the FIFO before it returns
  own.tag = tag;
  own.slot = &slot;
  const std::shared_ptr<RecvWaiter> parked(std::shared_ptr<RecvWaiter>(), &own);  // (owns nothing)
  std::shared_ptr<Connection> connection;
  std::optional<Result<Received>> taken;
  {
    auto in = inbox_.lock();
    taken = in.take(tag);
    if (!taken && waker.valid() && in.caller_read() && !in.waiting(tag)) {
      (void)in.park(parked);  // (no deadline: this thread keeps it)
      connection = in.caller_read();
    }
  }
  const bool read_here = connection != nullptr;
  if (taken) {
    after_taken();
    return ready_future(std::move(*taken), impl_.poster);
  }
  if (connection) {
    connection->read_for({nullptr, &slot.filled}, std::min(wait_until, timeout_at),
                         std::chrono::microseconds(impl_.spec.comm.recv_busy_poll_us));
    impl_.let_go(std::move(connection));
  }
  // (Made before the lock; the fast path, a filled slot, makes none.)
  std::shared_ptr<RecvWaiter> waiter =
      slot.filled.load(std::memory_order_acquire) ? nullptr : RecvWaiter::make(impl_.self.lock(), this, tag, {});
  bool arm = false;
  {
    auto in = inbox_.lock();
    const bool own_parked = read_here && !own.done;  // (nothing came for it)
    if (slot.filled.load(std::memory_order_relaxed)) taken = std::move(*slot.result);
    else if (!own_parked) taken = in.take(tag);
    if (!taken && Clock::now() >= timeout_at) taken = Result<Received>(timeout_error("recv", peer_, *timeout));
    if (taken) {
      if (own_parked) in.unpark(parked);
    } else {
      waiter->timeout = timeout;
      waiter->deadline = timeout_at;
      arm = own_parked ? in.replace(parked, waiter) : in.park(waiter);
    }
  }
  if (taken) {
    after_taken();
    return ready_future(std::move(*taken), impl_.poster);
  }
  Future<Received> future = waiter->promise->future();
  if (arm) rearm_for(waiter);
  return future;
}

void PeerState::help_recv(const std::shared_ptr<RecvWaiter>& waiter, Clock::time_point deadline) {
  // A thread blocked on a parked recv reads the connection itself, so the kernel wakes it
  // when the message comes, instead of waking the loop to read it and then this thread.
  if (auto connection = connection_to_help(*waiter)) {
    connection->read_for({&*waiter->promise}, deadline, std::chrono::microseconds(impl_.spec.comm.recv_busy_poll_us));
    impl_.let_go(std::move(connection));
  }
}

std::shared_ptr<Connection> PeerState::connection_to_help(const RecvWaiter& waiter) {
  auto in = inbox_.lock();
  return waiter.done ? nullptr : in.caller_read();
}

PeerStats PeerState::stats() {
  PeerStats s = session_.stats();
  s.recvs_waiting = inbox_.lock().waiting_count();
  return s;
}

bool PeerState::recvs_waiting(std::size_t beyond) { return inbox_.lock().waiting_beyond(beyond); }

void PeerState::refresh_caller_read() {
  const auto& connections = session_.connections();
  inbox_.lock().set_caller_read(connections.size() == 1 && !session_.closing() ? connections.front() : nullptr);
}

void PeerState::read_soon() {
  for (const auto& connection : session_.connections()) connection->read_soon();
}

bool PeerState::loop_stands_down() {
  auto in = inbox_.lock();
  return in.caller_read() && in.caller_read()->standing_down();
}

void PeerState::cancel_recv(const std::shared_ptr<RecvWaiter>& waiter, Error error) {
  // A waiter a frame is being read into completes with that frame (it owns the memory now).
  if (!inbox_.lock().unpark(waiter)) return;
  complete_recv(waiter, std::move(error), /*by_loop=*/true, nullptr);
}

std::shared_ptr<RecvWaiter> PeerState::claim_into_waiter(std::uint32_t tag) {
  // A recv_into posted as this frame arrives may be missed: deliver then copies into it.
  if (!inbox_.any_recv_into()) return nullptr;
  return inbox_.lock().claim_into(tag);
}

void PeerState::unclaim_into_waiter(const std::shared_ptr<RecvWaiter>& waiter) {
  if (inbox_.lock().unclaim(*waiter)) rearm_for(waiter);
}

void PeerState::end_superseded(Connection& from, const std::vector<Connection*>& superseded) {
  for (Connection* old : superseded) {
    if (old == &from)
      spdlog::info("wcomm[{}]: peer '{}' moved to another connection before this frame on {} came: ending it",
                   impl_.spec.local.node_id, peer_.node_id, from.describe());
    else
      spdlog::info("wcomm[{}]: peer '{}' moved to {}: ending {}, whose frames still on their way are older",
                   impl_.spec.local.node_id, peer_.node_id, from.describe(), old->describe());
    impl_.post([weak = old->weak_from_this(), id = peer_.node_id] {
      if (auto c = weak.lock())
        c->fail({ErrorCode::kConnectionClosed, "superseded: peer '" + id + "' moved to another connection"}, true);
    });
  }
}

bool PeerState::complete_into_waiter(Connection* from, std::uint8_t flags, const std::shared_ptr<RecvWaiter>& waiter,
                                     Result<Received> result, bool by_loop, Later& later) {
  bool accepted = true;
  std::vector<Connection*> superseded;
  {
    auto in = inbox_.lock();
    if (from && !in.admit(*from, flags, superseded)) {
      accepted = false;
      result = Error{ErrorCode::kConnectionClosed, "the message being read into this recv_into came on a connection "
                                                   "its sender had left (superseded); it was dropped"};
    }
    in.finish(waiter);
  }
  if (from) end_superseded(*from, superseded);
  complete_recv(waiter, std::move(result), by_loop, &later);
  return accepted;
}

bool PeerState::deliver(Connection& from, std::uint8_t flags, std::uint32_t tag, Received&& message, bool by_loop,
                        Later& later, std::optional<std::uint64_t> retry_key) {
  std::shared_ptr<RecvWaiter> waiter;
  std::vector<Connection*> superseded;
  bool admitted;
  {
    auto in = inbox_.lock();
    admitted = in.admit(from, flags, superseded);
    // A repeat of a message delivered already (its sender retried after an unknown outcome):
    // dropped, and acknowledged so that the retry completes.
    if (admitted) {
      if (retry_key && in.seen_retry_key(*retry_key)) impl_.stats.duplicates_dropped.fetch_add(1, std::memory_order_relaxed);
      else waiter = in.hand_over(tag, message);
    }
  }
  // Whatever became of the frame, the connections it superseded end (a repeat may be the first
  // frame on the connection its sender moved to; a dropped one, its own connection).
  end_superseded(from, superseded);
  if (!admitted) return false;
  if (!waiter) return true;
  Result<Received> result = std::move(message);
  if (!waiter->into.empty()) {
    // A recv_into that came after this frame's storage was chosen: copy into its tensors.
    if (auto mismatch = fill_into(result.value().value, waiter->into, impl_.stats.bytes_copied))
      result = Error{ErrorCode::kUnsupportedPayload, "recv_into: " + *mismatch + "; the message was dropped"};
  }
  complete_recv(std::move(waiter), std::move(result), by_loop, &later);
  return true;
}

// The one way a recv completes, but for one taken at the call (finish_taken: its Future is
// not out yet, so nothing can run inline). Called by a connection's reader, in arrival order,
// and on the loop for failures (cancel, timeout, a lost connection, close), which so keep
// their place behind completions a reading caller handed over. On the loop a waiter completes at once
// (its callback held in `later` until the reader lets go of the reading), unless completions
// a caller handed over are still pending: then behind them. On a caller's thread the result
// is set at once, but callbacks belong to the loop: they go there, in order.
void PeerState::complete_recv(std::shared_ptr<RecvWaiter> waiter, Result<Received>&& result, bool by_loop,
                              Later* later) {
  if (by_loop && deferred_completions_.load() == 0) {
    if (!later) return (void)waiter->promise->complete(std::move(result));
    waiter->promise->complete_deferring_callback(std::move(result),
                                                [later](std::function<void()> fn) { later->push_back(std::move(fn)); });
  } else if (by_loop) {
    post_in_order([waiter, result = std::move(result)]() mutable { waiter->promise->complete(std::move(result)); });
  } else {
    waiter->promise->complete_deferring_callback(std::move(result),
                                                [this](std::function<void()> fn) { post_in_order(std::move(fn)); });
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

bool PeerState::pause_if_full(Connection& connection) {
  bool look_again = false;
  if (!inbox_.pause_if_full(connection.shared_from_this(), look_again)) return false;
  if (look_again) impl_.post([this] { resume_paused(); });
  return true;
}

// Frames being read count against the bound (their storage is allocated); no lock: every
// frame charges and releases.
void PeerState::charge_partial(std::uint64_t bytes) { inbox_.charge_partial(bytes); }

void PeerState::release_partial(std::uint64_t bytes) {
  if (bytes == 0) return;
  inbox_.release_partial(bytes);
  if (inbox_.any_paused()) impl_.post([this] { resume_paused(); });
}

// ---- the session's events ----------------------------------------------------------------

void PeerState::on_connection_added(const std::shared_ptr<Connection>& connection) {
  inbox_.lock().add_reading(connection.get());
  refresh_caller_read();
}

void PeerState::on_connection_removed(const std::shared_ptr<Connection>& connection) {
  if (connection) inbox_.lock().remove(connection);  // (no longer admitted, nor paused)
  refresh_caller_read();
}

void PeerState::fail_recvs_after_loss(const Error& error, bool local, std::optional<std::uint32_t> refused_tag) {
  // (A local end, ours to choose: the recvs wait for the next connection.)
  if (local) return;
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
  {
    // The peer went away: recvs waiting on it learn why. A frame this side refused (too large,
    // bad data, an unknown type) fails the recv it would have reached, on its tag: the first
    // waiting there, else the next to come (its error takes the frame's place in the FIFO).
    auto in = inbox_.lock();
    bool told = false;
    if (refused_tag) refused_owner = in.route_refusal(*refused_tag, error);
    // Recvs wait on the peer, not on one connection. One that ended cleanly while another to
    // the same peer lives (both sides dialed at once) leaves them to that one, which may still
    // bring their messages (a peer closing writes its last words on the connection it sends
    // on, and its end may be read on the other first); they fail when the last one ends. A
    // broken protocol fails them at once.
    if (session_.connections().empty() || error.code != ErrorCode::kConnectionClosed)
      waiting = in.take_waiters(recv_error, &told);
    // A stream that broke with nobody waiting (a protocol error) must not vanish either: the
    // next recv on this peer that finds nothing queued reports it. The first such error is
    // kept; later ones are counted and logged, never overwrite it.
    if (!refused_tag && !told && error.code != ErrorCode::kConnectionClosed) {
      if (!in.keep_unreported(error)) {
        impl_.stats.errors_without_waiter.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("wcomm[{}]: peer '{}': {} (nobody waiting; an earlier error is still unreported)",
                     impl_.spec.local.node_id, peer_.node_id, error.message);
      }
    }
  }
  if (refused_owner) complete_recv(refused_owner, error, /*by_loop=*/true, nullptr);
  for (auto& w : waiting) complete_recv(w, recv_error, /*by_loop=*/true, nullptr);
}

void PeerState::fail_waiting_recvs(const Error& error) {
  for (auto& w : inbox_.lock().take_waiters(error)) complete_recv(w, error, /*by_loop=*/true, nullptr);
}

void PeerState::close_receiving(const Error& error) {
  std::vector<std::shared_ptr<RecvWaiter>> waiting;
  {
    auto in = inbox_.lock();
    in.close(error);
    waiting = in.take_waiters(error);
  }
  for (auto& w : waiting) complete_recv(w, error, /*by_loop=*/true, nullptr);
}

void PeerState::resume_paused() {
  for (auto& connection : inbox_.take_paused_if_room()) connection->resume_reading();
}

}  // namespace wcomm
