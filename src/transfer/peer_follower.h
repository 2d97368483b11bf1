// PeerFollower: calls on_peer once for each peer of a Comm, those there now and each that
// enters its directory later (Comm::add_peer, or a node that joined), until stop(). The parts
// of the transfer engine that keep a receive per peer (notifications, the tcp backend, the
// cache service) follow peers this way, so agents that meet through metadata alone find
// each other's receives armed.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#include "wcomm/comm.h"

namespace wcomm::xfer {

class PeerFollower : public std::enable_shared_from_this<PeerFollower> {
 public:
  using OnPeer = std::function<void(const Peer&)>;

  static std::shared_ptr<PeerFollower> start(std::shared_ptr<Comm> comm, OnPeer on_peer) {
    auto f = std::shared_ptr<PeerFollower>(new PeerFollower(std::move(comm), std::move(on_peer)));
    // Watched first, then the peers now: one that joins in between is seen once all the same.
    f->watch_ = f->comm_->watch_peer_events([weak = std::weak_ptr<PeerFollower>(f)](const PeerEvent& e) {
      if (e.kind != PeerEvent::Kind::kJoined) return;
      if (auto self = weak.lock()) self->follow(e.node_id);
    });
    for (const Peer& p : f->comm_->peers()) f->follow(p.node_id);
    return f;
  }
  ~PeerFollower() { stop(); }

  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    comm_->unwatch_peer_events(watch_);
  }

 private:
  PeerFollower(std::shared_ptr<Comm> comm, OnPeer on_peer) : comm_(std::move(comm)), on_peer_(std::move(on_peer)) {}

  void follow(const std::string& node_id) {
    const Peer* peer = nullptr;
    try {
      peer = &comm_->peer(node_id);  // the directory's entry: valid as long as the Comm
    } catch (const std::out_of_range&) {
      return;  // removed again meanwhile
    }
    {
      std::lock_guard lock(mu_);
      if (stopped_ || !seen_.insert(peer).second) return;
    }
    on_peer_(*peer);  // not under our lock: it arms receives under its owner's
  }

  std::shared_ptr<Comm> comm_;
  OnPeer on_peer_;
  std::uint64_t watch_ = 0;
  std::mutex mu_;
  bool stopped_ = false;
  std::set<const Peer*> seen_;
};

}  // namespace wcomm::xfer
