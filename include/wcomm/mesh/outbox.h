// OutboxCommunicator: sends that never block. A message a peer cannot take now (at its
// high-water mark) is queued behind any earlier one to that peer and retried by flush(), so a
// loop that peers block on keeps reading while it sends (the two-entity deadlock cannot form).
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "wcomm/mesh/communicator.h"

namespace wcomm::mesh {

class OutboxCommunicator {
 public:
  // inner must outlive the outbox. A peer whose backlog passes warn_backlog messages is
  // named in a warning (once per stall; re-armed once its backlog drains); 0: the
  // environment variable MSTAR_ZMQ_BACKLOG_WARN, else 10000.
  explicit OutboxCommunicator(Communicator& inner, std::size_t warn_backlog = 0);

  Communicator& inner() { return inner_; }

  // Flushes what entity_id can take, then sends msg or queues it. Never blocks.
  void send(const std::string& entity_id, const Value& msg) { send_bytes(entity_id, inner_.codec().encode(msg)); }
  // msg encoded once, then sent (or queued) to each entity.
  void send_each(const std::vector<std::string>& entity_ids, const Value& msg);
  void send_bytes(const std::string& entity_id, std::string data);

  // Sends what peers can take now; true if anything is still queued. A queued message whose
  // send fails outright (not a full peer) is dropped and logged, so nothing behind it stalls.
  bool flush();

  // The inner communicator's, flushing first and whenever a backlogged peer can take more
  // while they wait, so the backlog moves while the owner waits.
  std::vector<Value> get_all_new_messages(bool blocking = false, std::optional<double> timeout_s = {});
  bool poll_for_messages(int timeout_ms = 20);
  void wait_for_work(int timeout_ms = 50) { wait(timeout_ms); }
  Communicator::WaitResult wait(int timeout_ms);

  std::size_t backlog(const std::string& entity_id) const;
  std::size_t backlog() const;
  std::size_t dropped() const { return dropped_; }

 private:
  std::vector<std::string> backlogged() const;
  bool flush_peer(const std::string& entity_id, std::deque<std::string>& queue);

  Communicator& inner_;
  std::size_t warn_backlog_;
  std::map<std::string, std::deque<std::string>, std::less<>> queues_;
  std::map<std::string, bool, std::less<>> warned_;
  std::size_t dropped_ = 0;
};

}  // namespace wcomm::mesh
