// OutboxCommunicator: per-peer FIFO backlogs in front of try_send_bytes.
#include "wcomm/mesh/outbox.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "wcomm/mesh/endpoints.h"

namespace wcomm::mesh {

namespace {
// A blocking receive with a backlog pending waits at most this long at a time, so the
// backlog keeps draining while the owner waits (mesh-zmq.md).
constexpr int kBacklogWaitMs = 50;
}  // namespace

OutboxCommunicator::OutboxCommunicator(Communicator& inner, std::size_t warn_backlog)
    : inner_(inner),
      warn_backlog_(warn_backlog ? warn_backlog
                                 : static_cast<std::size_t>(env_integer("MSTAR_ZMQ_BACKLOG_WARN", 10000, 1, INT64_MAX))) {}

bool OutboxCommunicator::flush_peer(const std::string& entity_id, std::deque<std::string>& queue) {
  while (!queue.empty()) {
    try {
      if (!inner_.try_send_bytes(entity_id, queue.front())) break;  // full: the rest waits its turn
    } catch (const std::exception& e) {
      // No caller is left to raise to, and keeping it would stall everything behind it.
      spdlog::error("mesh outbox of '{}': dropped a message of {} bytes to '{}': {}", inner_.my_id(),
                    queue.front().size(), entity_id, e.what());
      ++dropped_;
    }
    queue.pop_front();
  }
  if (queue.empty()) warned_[entity_id] = false;  // re-armed once drained
  return !queue.empty();
}

void OutboxCommunicator::send_bytes(const std::string& entity_id, std::string data) {
  auto& queue = queues_[entity_id];
  if (!flush_peer(entity_id, queue)) {
    // Nothing queued ahead: try directly (errors from a direct send reach the caller).
    if (inner_.try_send_bytes(entity_id, data)) return;
  }
  queue.push_back(std::move(data));
  if (queue.size() > warn_backlog_ && !warned_[entity_id]) {
    warned_[entity_id] = true;
    spdlog::warn("mesh outbox of '{}': {} messages queued for '{}' (more than {}): is it stalled?", inner_.my_id(),
                 queue.size(), entity_id, warn_backlog_);
  }
}

void OutboxCommunicator::send_each(const std::vector<std::string>& entity_ids, const Value& msg) {
  const std::string data = inner_.codec().encode(msg);
  for (const std::string& id : entity_ids) send_bytes(id, data);
}

bool OutboxCommunicator::flush() {
  bool left = false;
  for (auto& [id, queue] : queues_) left |= flush_peer(id, queue);
  return left;
}

std::vector<Value> OutboxCommunicator::get_all_new_messages(bool blocking, std::optional<double> timeout_s) {
  if (!blocking) {
    flush();
    return inner_.get_all_new_messages();
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = timeout_s ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(*timeout_s))
                                  : Clock::time_point::max();
  while (true) {
    const bool pending = flush();
    long wait_ms = -1;
    if (timeout_s) {
      wait_ms = std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    }
    if (pending) wait_ms = wait_ms < 0 ? kBacklogWaitMs : std::min<long>(wait_ms, kBacklogWaitMs);
    const auto started = Clock::now();
    std::vector<Value> got = inner_.get_all_new_messages(true, wait_ms < 0 ? std::optional<double>() : wait_ms / 1000.0);
    // Ended before its time with nothing: the registered event fired; that ends this wait too.
    const bool woken = got.empty() && Clock::now() - started < std::chrono::milliseconds(wait_ms - 1);
    if (!got.empty() || !pending || woken || Clock::now() >= deadline) return got;
  }
}

bool OutboxCommunicator::poll_for_messages(int timeout_ms) {
  flush();
  return inner_.poll_for_messages(timeout_ms);
}

std::size_t OutboxCommunicator::backlog(const std::string& entity_id) const {
  auto it = queues_.find(entity_id);
  return it == queues_.end() ? 0 : it->second.size();
}

std::size_t OutboxCommunicator::backlog() const {
  std::size_t n = 0;
  for (const auto& [id, queue] : queues_) n += queue.size();
  return n;
}

}  // namespace wcomm::mesh
