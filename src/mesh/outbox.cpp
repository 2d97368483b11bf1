// OutboxCommunicator: per-peer FIFO backlogs in front of try_send_bytes.
#include "wcomm/mesh/outbox.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "wcomm/mesh/endpoints.h"

namespace wcomm::mesh {

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

std::vector<std::string> OutboxCommunicator::backlogged() const {
  std::vector<std::string> ids;
  for (const auto& [id, queue] : queues_)
    if (!queue.empty()) ids.push_back(id);
  return ids;
}

Communicator::WaitResult OutboxCommunicator::wait(int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    flush();
    int left = timeout_ms;
    if (timeout_ms >= 0)
      left = static_cast<int>(
          std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    // A peer that can take its backlog again ends the inner wait; the backlog moves, and the
    // wait goes on for what the caller waits for.
    Communicator::WaitResult r = inner_.wait(left, backlogged());
    if (r.readable || r.event || !r.writable || (timeout_ms >= 0 && Clock::now() >= deadline)) {
      flush();
      return r;
    }
  }
}

std::vector<Value> OutboxCommunicator::get_all_new_messages(bool blocking, std::optional<double> timeout_s) {
  if (blocking) wait(timeout_s ? static_cast<int>(*timeout_s * 1000) : -1);
  else flush();
  return inner_.get_all_new_messages();
}

bool OutboxCommunicator::poll_for_messages(int timeout_ms) { return wait(timeout_ms).readable; }

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
