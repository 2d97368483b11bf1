// Notifications over the Comm: one outstanding recv per peer on kNotifyTag, re-armed after
// each message until the channel closes.
#include "transfer/notify_channel.h"

namespace wcomm::xfer {

void NotifyChannel::start() {
  for (const Peer& p : comm_->peers()) arm(p);
}

void NotifyChannel::arm(const Peer& peer) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  Future<Received> f = comm_->recv(peer, {.tag = kNotifyTag});
  std::weak_ptr<NotifyChannel> weak = weak_from_this();
  f.then([weak, peer](Result<Received> got) {
    auto self = weak.lock();
    if (!self) return;
    if (got) {
      const Value& v = got.value().value;
      const Dict* d = v.get_if<Dict>();
      const Value* from = d ? d->find("from") : nullptr;
      const Value* message = d ? d->find("message") : nullptr;
      if (from && message && from->is<std::string>() && message->is<std::string>()) {
        std::lock_guard lock(self->mu_);
        self->inbox_.push_back({from->as<std::string>(), message->as<std::string>()});
      }
    } else {
      const ErrorCode code = got.error().code;
      if (code == ErrorCode::kClosed || code == ErrorCode::kCancelled) return;
    }
    self->arm(peer);
  });
  pending_.push_back(std::move(f));
  // Futures of completed receives are dropped now and then so the list stays short.
  if (pending_.size() > 64)
    std::erase_if(pending_, [](const Future<Received>& x) { return x.ready(); });
}

void NotifyChannel::send(const std::string& node, const std::string& from, const std::string& message,
                         std::function<void(Status)> done) {
  const Peer* peer = nullptr;
  try {
    peer = &comm_->peer(node);
  } catch (const std::out_of_range&) {
    done(Error{ErrorCode::kInvalidArgument, "notification: node '" + node + "' is not a peer of this agent's Comm"});
    return;
  }
  comm_->send(Dict{{"from", from}, {"message", message}}, *peer, {}, {.tag = kNotifyTag})
      .then([done = std::move(done)](Result<SendResult> r) {
        if (r) done(Ok{});
        else done(r.error());
      });
}

std::vector<Notification> NotifyChannel::take() {
  std::lock_guard lock(mu_);
  return std::exchange(inbox_, {});
}

void NotifyChannel::close() {
  std::vector<Future<Received>> pending;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    pending = std::move(pending_);
  }
  for (auto& f : pending) f.cancel();
}

}  // namespace wcomm::xfer
