// Notifications between agents: a small message on a reserved tag of the agents' Comm, sent
// after a transfer's bytes are in place (or on its own, Agent::send_notification), and an
// inbox of the ones that arrived from any peer, joined ones too (TagListener).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transfer/tag_listener.h"
#include "wcomm/comm.h"
#include "wcomm/xfer/agent.h"

namespace wcomm::xfer {

inline constexpr std::uint32_t kNotifyTag = kFirstReservedTag + 0;

class NotifyChannel : public std::enable_shared_from_this<NotifyChannel> {
 public:
  explicit NotifyChannel(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {}
  void start();
  // done runs once, on the Comm's loop thread (or here, for a node that is no peer).
  void send(const std::string& node, const std::string& from, const std::string& message,
            std::function<void(Status)> done, std::optional<Seconds> timeout = std::nullopt);
  std::vector<Notification> take();
  void close();

 private:
  std::shared_ptr<Comm> comm_;
  std::shared_ptr<TagListener> listener_;
  std::mutex mu_;
  std::vector<Notification> inbox_;
};

}  // namespace wcomm::xfer
