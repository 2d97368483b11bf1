// Inbox: a peer's receive-side state under its own lock (inbox.h).
#include "comm/inbox.h"

#include <algorithm>
#include <utility>

#include "comm/comm_impl.h"

namespace wcomm {

std::optional<Result<Received>> Inbox::Locked::take(std::uint32_t tag) {
  Inbox& in = inbox_;
  if (in.closed_) return Result<Received>(*in.closed_);
  auto found = in.arrived_.find(tag);
  if (found != in.arrived_.end() && !found->second.empty()) {
    Result<Received> got = std::move(found->second.front());
    found->second.pop_front();
    if (got.ok()) {
      in.unreceived_messages_ -= 1;
      in.unreceived_bytes_ -= got.value().wire_bytes;
    }
    return got;
  }
  if (in.unreported_) {
    Error error = std::move(*in.unreported_);
    in.unreported_.reset();
    return Result<Received>(Error{error.code, "earlier, while nothing was waiting: " + error.message});
  }
  return std::nullopt;
}

bool Inbox::Locked::waiting(std::uint32_t tag) const {
  auto found = inbox_.waiters_.find(tag);
  return found != inbox_.waiters_.end() &&
         std::any_of(found->second.begin(), found->second.end(), [](auto& w) { return !w->done; });
}

bool Inbox::Locked::waiting_beyond(std::size_t beyond) const {
  std::size_t waiting = 0;
  for (const auto& [tag, waiters] : inbox_.waiters_)
    for (const auto& w : waiters)
      if (!w->done && ++waiting > beyond) return true;
  return false;
}

std::size_t Inbox::Locked::waiting_count() const {
  std::size_t waiting = 0;
  for (const auto& [tag, waiters] : inbox_.waiters_)
    for (const auto& w : waiters) waiting += w->done ? 0 : 1;
  return waiting;
}

bool Inbox::Locked::park(std::shared_ptr<RecvWaiter> waiter) {
  const bool arm = inbox_.deadlines_.keep(*waiter);
  inbox_.waiters_[waiter->tag].push_back(std::move(waiter));
  return arm;
}

bool Inbox::Locked::replace(const std::shared_ptr<RecvWaiter>& parked, std::shared_ptr<RecvWaiter> waiter) {
  const bool arm = inbox_.deadlines_.keep(*waiter);
  auto& queue = inbox_.waiters_[parked->tag];
  *std::find(queue.begin(), queue.end(), parked) = std::move(waiter);
  parked->done = true;
  return arm;
}

bool Inbox::fill_slot(RecvWaiter& waiter, Result<Received>&& result, bool wake) {
  RecvSlot* slot = waiter.slot;
  if (!slot) return false;
  slot->result.emplace(std::move(result));
  slot->filled.store(true, std::memory_order_release);
  if (wake) slot->waker->wake();
  return true;
}

std::vector<std::shared_ptr<RecvWaiter>> Inbox::Locked::take_due(Clock::time_point now, Clock::time_point& next) {
  std::vector<std::shared_ptr<RecvWaiter>> due;
  while (CommOperation* op = inbox_.deadlines_.pop_due(now)) {
    auto waiter = static_cast<RecvWaiter&>(*op).shared_from_this();
    finish(waiter);  // (kept only while waiting: neither done nor claimed)
    due.push_back(std::move(waiter));
  }
  next = inbox_.deadlines_.rearm();
  return due;
}

bool Inbox::Locked::unpark(const std::shared_ptr<RecvWaiter>& waiter) {
  if (waiter->done || waiter->claimed) return false;
  finish(waiter);
  return true;
}

void Inbox::Locked::finish(const std::shared_ptr<RecvWaiter>& waiter) {
  auto& queue = inbox_.waiters_[waiter->tag];
  queue.erase(std::remove(queue.begin(), queue.end(), waiter), queue.end());
  waiter->done = true;
  inbox_.deadlines_.forget(*waiter);
}

std::shared_ptr<RecvWaiter> Inbox::Locked::claim_into(std::uint32_t tag) {
  auto found = inbox_.waiters_.find(tag);
  if (found == inbox_.waiters_.end() || found->second.empty()) return nullptr;
  auto& front = found->second.front();
  if (front->into.empty() || front->done) return nullptr;
  front->claimed = true;
  inbox_.deadlines_.forget(*front);  // the frame completes it, whenever it ends
  return front;
}

bool Inbox::Locked::unclaim(RecvWaiter& waiter) {
  waiter.claimed = false;
  return inbox_.deadlines_.keep(waiter);
}

std::shared_ptr<RecvWaiter> Inbox::Locked::hand_over(std::uint32_t tag, Received& message) {
  if (auto found = inbox_.waiters_.find(tag); found != inbox_.waiters_.end()) {
    auto& queue = found->second;
    while (!queue.empty()) {
      auto next = std::move(queue.front());
      queue.pop_front();
      if (next->done) continue;
      next->done = true;
      inbox_.deadlines_.forget(*next);
      // (Read by its own thread, or by the loop while that thread waits it out: not asleep.)
      if (!next->slot) return next;
      fill_slot(*next, std::move(message), /*wake=*/false);
      return nullptr;
    }
  }
  inbox_.unreceived_messages_ += 1;
  inbox_.unreceived_bytes_ += message.wire_bytes;
  inbox_.arrived_[tag].push_back(std::move(message));
  return nullptr;
}

std::shared_ptr<RecvWaiter> Inbox::Locked::route_refusal(std::uint32_t tag, const Error& error) {
  if (auto found = inbox_.waiters_.find(tag); found != inbox_.waiters_.end()) {
    auto& queue = found->second;
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if ((*it)->done || (*it)->claimed) continue;
      auto waiter = std::move(*it);
      queue.erase(it);
      waiter->done = true;
      inbox_.deadlines_.forget(*waiter);
      if (fill_slot(*waiter, error, /*wake=*/true)) return nullptr;
      return waiter;
    }
  }
  inbox_.arrived_[tag].push_back(error);
  return nullptr;
}

bool Inbox::Locked::keep_unreported(const Error& error) {
  if (inbox_.unreported_) return false;
  inbox_.unreported_ = error;
  return true;
}

std::vector<std::shared_ptr<RecvWaiter>> Inbox::Locked::take_waiters(const Error& error, bool* told) {
  std::vector<std::shared_ptr<RecvWaiter>> out;
  bool any = false;
  for (auto& [tag, queue] : inbox_.waiters_) {
    for (auto& w : queue)
      if (!w->done && !w->claimed) {
        w->done = true;
        inbox_.deadlines_.forget(*w);
        any = true;
        if (!fill_slot(*w, error, /*wake=*/true)) out.push_back(w);  // (its thread may sleep in its read)
      }
    std::erase_if(queue, [](auto& w) { return w->done; });
  }
  if (told) *told = any;
  return out;
}

void Inbox::Locked::remove(const std::shared_ptr<Connection>& connection) {
  std::erase(inbox_.reading_, connection.get());
  std::erase(inbox_.paused_, connection);
}

bool Inbox::Locked::admit(Connection& from, std::uint8_t flags, std::vector<Connection*>& to_end) {
  if (from.superseded) {
    // Written before the peer moved away: older than what it sent since, flagged or not (a
    // flagged one here is an earlier move's first frame, arriving late; a sender never goes
    // back to a connection it left). Dropped, and the connection ends: the peer has left it.
    if (!std::exchange(from.ending, true)) to_end.push_back(&from);
    return false;
  }
  if (flags & kFlagSupersedes)
    for (Connection* old : inbox_.reading_) {
      if (old == &from || old->superseded) continue;
      old->superseded = true;
      // A sender moves only once it gave up the connection it wrote on: one it wrote on ends
      // now. One it never wrote on (this side dialed it at the same time) lives on: the peer
      // still reads this side's frames there. A frame from the peer that turns up on it after
      // all is older, and ends it then (above).
      if (old->peer_wrote_data) {
        old->ending = true;
        to_end.push_back(old);
      }
    }
  from.peer_wrote_data = true;
  return true;
}

bool Inbox::Locked::seen_retry_key(std::uint64_t key) {
  if (!inbox_.retry_keys_seen_.insert(key).second) return true;
  inbox_.retry_key_order_.push_back(key);
  if (inbox_.retry_key_order_.size() > kRetryKeyWindow) {
    inbox_.retry_keys_seen_.erase(inbox_.retry_key_order_.front());
    inbox_.retry_key_order_.pop_front();
  }
  return false;
}

bool Inbox::full_locked() const {
  return unreceived_messages_ >= limits_.max_peer_unreceived_messages ||
         unreceived_bytes_ + partial_bytes_.load() >= limits_.max_peer_unreceived_bytes;
}

bool Inbox::pause_if_full(const std::shared_ptr<Connection>& connection, bool& look_again) {
  std::lock_guard lock(mutex_);
  if (!full_locked()) return false;
  paused_.push_back(connection);  // (only now: this runs before every frame)
  any_paused_.store(true);
  look_again = !full_locked();
  return true;
}

std::vector<std::shared_ptr<Connection>> Inbox::take_paused_if_room() {
  std::lock_guard lock(mutex_);
  if (paused_.empty() || full_locked()) return {};
  any_paused_.store(false, std::memory_order_release);
  return std::exchange(paused_, {});
}

}  // namespace wcomm
