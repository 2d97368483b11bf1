// EgressScheduler: the node-wide egress byte scheduler (V0.1's `scheduler`, docs/cpp-api.md
// "Egress scheduling"). Every peer's writer asks it for the bytes it may write next; it grants
// at most one quantum per turn and serves the writers in turn (deficit round robin in
// quanta: a writer asks again only after writing its grant, so it rejoins at the tail), with
// one token bucket for the whole node when a rate is set, urgent requests (small messages)
// ahead of the others, and at most max_bulk_flows writers holding a bulk flow at once.
// Loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <set>

#include <asio.hpp>

#include "comm/egress.h"

namespace wcomm {

class EgressScheduler {
 public:
  using Grant = std::function<void(std::uint64_t bytes)>;
  struct Settings {
    std::uint64_t quantum_bytes = 0;  // 0: the scheduler is off
    double rate_bytes_per_second = 0;  // 0: no rate
    std::uint64_t burst_bytes = 0;     // 0: one quantum
    std::uint64_t max_bulk_flows = 0;  // 0: no cap
  };
  // Throws InvalidArgumentError for settings V0.1's scheduler refuses.
  EgressScheduler(asio::io_context& io, Settings settings);

  bool enabled() const { return settings_.quantum_bytes > 0; }
  // Asks for up to `bytes` (> 0) for `who`; `grant` runs on the loop, later, with g <= quantum
  // bytes that may be written now. One request per writer at a time (a second is a logic
  // error: InvalidArgumentError). urgent: served before non-urgent requests. bulk: needs one
  // of the max_bulk_flows slots, held until end_bulk(who).
  void request(const void* who, std::uint64_t bytes, bool urgent, bool bulk, Grant grant);
  // Drops who's waiting request, if any (its grant never runs).
  void cancel(const void* who);
  // who's bulk message is done: its flow slot goes to the next waiting writer.
  void end_bulk(const void* who);
  // Whether who may start a bulk message now (it holds a slot, or one is free). A writer that
  // may not writes its other messages and asks to be woken (once) when a slot frees.
  bool bulk_slot_for(const void* who) const {
    return settings_.max_bulk_flows == 0 || flows_.count(who) || flows_.size() < settings_.max_bulk_flows;
  }
  void wake_on_bulk_slot(const void* who, std::function<void()> wake);
  // Fails nothing (the writers complete their own messages): drops every request.
  void close();

  // Tests and stats.
  std::size_t bulk_flows() const { return flows_.size(); }
  std::size_t waiting() const { return urgent_.size() + normal_.size() + bulk_waiting_.size(); }

 private:
  struct Request {
    const void* who;
    std::uint64_t bytes;
    bool urgent, bulk;
    Grant grant;
  };
  void enqueue(Request r);
  void schedule_service();
  void service();
  bool pending(const void* who) const;

  asio::io_context& io_;
  Settings settings_;
  std::optional<EgressPacer> bucket_;
  std::deque<Request> urgent_, normal_, bulk_waiting_;
  std::set<const void*> flows_;  // writers holding a bulk slot
  std::deque<std::pair<const void*, std::function<void()>>> slot_waiters_;
  bool service_posted_ = false;
  bool closed_ = false;
  asio::steady_timer timer_;
  bool timer_armed_ = false;
};

}  // namespace wcomm
