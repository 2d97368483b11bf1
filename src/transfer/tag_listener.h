// Receives every message on one tag from every peer of a Comm (those there at start and each
// that joins later: PeerFollower), a recv re-armed after each, and hands each value to a
// callback (on the Comm's loop thread) until stop(). Notifications, and the cache service's
// producer (requests) and consumer (acks), listen this way.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transfer/peer_follower.h"
#include "wcomm/comm.h"

namespace wcomm::xfer {

class TagListener : public std::enable_shared_from_this<TagListener> {
 public:
  using OnValue = std::function<void(const std::string& node_id, const Value& value)>;

  static std::shared_ptr<TagListener> start(std::shared_ptr<Comm> comm, std::uint32_t tag, OnValue on_value) {
    auto listener = std::shared_ptr<TagListener>(new TagListener(std::move(comm), tag, std::move(on_value)));
    listener->follower_ = PeerFollower::start(listener->comm_, [weak = std::weak_ptr<TagListener>(listener)](const Peer& p) {
      if (auto self = weak.lock()) self->arm(p);
    });
    return listener;
  }
  // Cancels the pending recvs; no value is handed over after this (one already being handed
  // over on the loop thread may finish).
  void stop() {
    if (follower_) follower_->stop();
    std::vector<Future<Received>> receives;
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
      receives = std::move(receives_);
    }
    for (auto& f : receives) f.cancel();
  }

 private:
  TagListener(std::shared_ptr<Comm> comm, std::uint32_t tag, OnValue on_value)
      : comm_(std::move(comm)), tag_(tag), on_value_(std::move(on_value)) {}

  void arm(const Peer& peer) {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    Future<Received> f = comm_->recv(peer, {.tag = tag_});
    f.then([weak = weak_from_this(), &peer](Result<Received> got) {
      auto self = weak.lock();
      if (!self) return;
      if (!got) {
        // A closed Comm or stop() ends listening; a lost connection does not.
        if (got.error().code == ErrorCode::kClosed || got.error().code == ErrorCode::kCancelled) return;
      } else if (!self->stopped()) {
        self->on_value_(peer.node_id, got.value().value);
      }
      self->arm(peer);
    });
    receives_.push_back(std::move(f));
    if (receives_.size() > 64) std::erase_if(receives_, [](const Future<Received>& x) { return x.ready(); });
  }
  bool stopped() {
    std::lock_guard lock(mu_);
    return stopped_;
  }

  std::shared_ptr<Comm> comm_;
  std::shared_ptr<PeerFollower> follower_;  // set once by start()
  const std::uint32_t tag_;
  OnValue on_value_;
  std::mutex mu_;
  bool stopped_ = false;
  std::vector<Future<Received>> receives_;
};

}  // namespace wcomm::xfer
