// EgressScheduler: round robin in quanta across writers, one token bucket, a bulk flow cap.
#include "comm/egress_scheduler.h"

#include <algorithm>
#include <string>

#include "wcomm/errors.h"

namespace wcomm {

EgressScheduler::EgressScheduler(asio::io_context& io, Settings settings)
    : io_(io), settings_(settings), timer_(io) {
  if (!enabled()) return;
  if (settings_.rate_bytes_per_second < 0)
    throw InvalidArgumentError("rate_bytes_per_second must be positive when configured");
  if (settings_.burst_bytes == 0) settings_.burst_bytes = settings_.quantum_bytes;
  if (settings_.burst_bytes < settings_.quantum_bytes)
    throw InvalidArgumentError("burst_bytes must be at least one quantum");
  if (settings_.rate_bytes_per_second > 0) bucket_.emplace(settings_.rate_bytes_per_second, settings_.burst_bytes);
}

bool EgressScheduler::pending(const void* who) const {
  auto has = [who](const std::deque<Request>& q) {
    return std::any_of(q.begin(), q.end(), [who](const Request& r) { return r.who == who; });
  };
  return has(urgent_) || has(normal_) || has(bulk_waiting_);
}

void EgressScheduler::request(const void* who, std::uint64_t bytes, bool urgent, bool bulk, Grant grant) {
  if (closed_) return;
  if (bytes == 0) throw InvalidArgumentError("requested_bytes must be positive");
  if (pending(who)) throw InvalidArgumentError("this peer already has a pending byte grant");
  Request r{who, bytes, urgent, bulk, std::move(grant)};
  if (bulk && !flows_.count(who)) {
    if (settings_.max_bulk_flows > 0 && flows_.size() >= settings_.max_bulk_flows) {
      bulk_waiting_.push_back(std::move(r));  // until a flow ends
      return;
    }
    flows_.insert(who);
  }
  enqueue(std::move(r));
}

void EgressScheduler::enqueue(Request r) {
  (r.urgent ? urgent_ : normal_).push_back(std::move(r));
  schedule_service();
}

void EgressScheduler::cancel(const void* who) {
  auto drop = [who](std::deque<Request>& q) {
    q.erase(std::remove_if(q.begin(), q.end(), [who](const Request& r) { return r.who == who; }), q.end());
  };
  drop(urgent_);
  drop(normal_);
  drop(bulk_waiting_);
  slot_waiters_.erase(std::remove_if(slot_waiters_.begin(), slot_waiters_.end(),
                                     [who](const auto& w) { return w.first == who; }),
                      slot_waiters_.end());
}

void EgressScheduler::wake_on_bulk_slot(const void* who, std::function<void()> wake) {
  for (const auto& w : slot_waiters_)
    if (w.first == who) return;
  slot_waiters_.emplace_back(who, std::move(wake));
}

void EgressScheduler::end_bulk(const void* who) {
  if (!flows_.erase(who)) return;
  while (!bulk_waiting_.empty() && (settings_.max_bulk_flows == 0 || flows_.size() < settings_.max_bulk_flows)) {
    Request r = std::move(bulk_waiting_.front());
    bulk_waiting_.pop_front();
    flows_.insert(r.who);
    enqueue(std::move(r));
  }
  // Writers that held their bulk back, in the order they asked: each takes a slot (or not,
  // if it has nothing bulk left) until none is free.
  while (!slot_waiters_.empty() && (settings_.max_bulk_flows == 0 || flows_.size() < settings_.max_bulk_flows)) {
    auto wake = std::move(slot_waiters_.front().second);
    slot_waiters_.pop_front();
    wake();
  }
}

void EgressScheduler::close() {
  closed_ = true;
  urgent_.clear();
  normal_.clear();
  bulk_waiting_.clear();
  slot_waiters_.clear();
  flows_.clear();
  timer_.cancel();
}

// Requests made at the same moment join the same round: the service runs one loop turn later.
void EgressScheduler::schedule_service() {
  if (service_posted_ || timer_armed_ || closed_) return;
  service_posted_ = true;
  asio::post(io_, [this] {
    service_posted_ = false;
    service();
  });
}

void EgressScheduler::service() {
  while (!closed_ && (!urgent_.empty() || !normal_.empty())) {
    std::deque<Request>& q = urgent_.empty() ? normal_ : urgent_;
    const std::uint64_t g = std::min(q.front().bytes, settings_.quantum_bytes);
    if (bucket_) {
      const auto delay = bucket_->delay_for(g);
      if (delay > EgressPacer::Clock::duration::zero()) {
        // V0.1: the request goes to the tail, and the service sleeps until the tokens are there.
        if (&q == &normal_ && q.size() > 1) {
          Request r = std::move(q.front());
          q.pop_front();
          q.push_back(std::move(r));
        }
        timer_armed_ = true;
        timer_.expires_after(delay);
        timer_.async_wait([this](std::error_code ec) {
          timer_armed_ = false;
          if (ec) return;
          if (bucket_) bucket_->refill_after_wait(settings_.quantum_bytes);
          service();
        });
        return;
      }
      bucket_->consume(g);
    }
    Request r = std::move(q.front());
    q.pop_front();
    r.grant(g);  // the writer writes g bytes, then asks again (back at the tail)
  }
}

}  // namespace wcomm
