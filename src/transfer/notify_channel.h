// Notifications between agents: a small message on a reserved tag of the agents' Comm, sent
// after a transfer's bytes are in place, and an inbox of the ones that arrived.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wcomm/comm.h"
#include "wcomm/xfer/agent.h"

namespace wcomm::xfer {

inline constexpr std::uint32_t kNotifyTag = kFirstReservedTag + 0;

class NotifyChannel : public std::enable_shared_from_this<NotifyChannel> {
 public:
  explicit NotifyChannel(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {}
  // Keeps one receive outstanding per peer of the Comm.
  void start();
  // done runs once, on the Comm's loop thread.
  void send(const std::string& node, const std::string& from, const std::string& message,
            std::function<void(Status)> done);
  std::vector<Notification> take();
  void close();

 private:
  void arm(const Peer& peer);
  std::shared_ptr<Comm> comm_;
  std::mutex mu_;
  bool closed_ = false;
  std::vector<Notification> inbox_;
  std::vector<Future<Received>> pending_;
};

}  // namespace wcomm::xfer
