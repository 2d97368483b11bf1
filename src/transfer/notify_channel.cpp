// Notifications over the Comm: {"from": agent name, "message": bytes} on kNotifyTag. The
// message travels as bytes (NIXL's notifications are byte strings); a str is read too.
#include "transfer/notify_channel.h"

namespace wcomm::xfer {

namespace {
const std::string* text_of(const Value* v, std::string& storage) {
  if (!v) return nullptr;
  if (v->is<std::string>()) return &v->as<std::string>();
  if (const Bytes* b = v->get_if<Bytes>()) return &(storage = std::string(b->view()));
  return nullptr;
}
}  // namespace

void NotifyChannel::start() {
  std::weak_ptr<NotifyChannel> weak = weak_from_this();
  listener_ = TagListener::start(comm_, kNotifyTag, [weak](const std::string&, const Value& v) {
    auto self = weak.lock();
    const Dict* d = v.get_if<Dict>();
    if (!self || !d) return;
    std::string from_storage, message_storage;
    const std::string* from = text_of(d->find("from"), from_storage);
    const std::string* message = text_of(d->find("message"), message_storage);
    if (!from || !message) return;  // not a notification: nothing to hand over
    std::lock_guard lock(self->mu_);
    self->inbox_.push_back({*from, *message});
  });
}

void NotifyChannel::send(const std::string& node, const std::string& from, const std::string& message,
                         std::function<void(Status)> done, std::optional<Seconds> timeout) {
  const Peer* peer = nullptr;
  try {
    peer = &comm_->peer(node);
  } catch (const std::out_of_range&) {
    done(Error{ErrorCode::kInvalidArgument, "notification: node '" + node + "' is not a peer of this agent's Comm"});
    return;
  }
  comm_->send(Dict{{"from", from}, {"message", Bytes(message)}}, *peer, {}, {.tag = kNotifyTag, .timeout = timeout})
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
  if (listener_) listener_->stop();
}

}  // namespace wcomm::xfer
