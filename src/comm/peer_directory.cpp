// PeerDirectory: snapshots published under a lock, read without one (peer_directory.h).
#include "comm/peer_directory.h"

#include "comm/comm_impl.h"

namespace wcomm {

PeerDirectory::PeerDirectory() {
  std::lock_guard lock(mu_);
  publish(std::make_unique<Snapshot>());
}

PeerDirectory::~PeerDirectory() = default;

PeerState* PeerDirectory::find(std::string_view node_id) const {
  const Snapshot& s = *current_.load(std::memory_order_acquire);
  auto found = s.by_name.find(node_id);
  return found == s.by_name.end() ? nullptr : found->second;
}

PeerState* PeerDirectory::find(const Peer& peer) const {
  const Snapshot& s = *current_.load(std::memory_order_acquire);
  auto found = s.by_address.find(&peer);
  if (found != s.by_address.end()) return found->second;
  auto by_name = s.by_name.find(peer.node_id);  // a Peer of the caller's own making
  return by_name == s.by_name.end() ? nullptr : by_name->second;
}

std::vector<PeerState*> PeerDirectory::current() const {
  std::vector<PeerState*> out;
  for (const auto& [name, state] : current_.load(std::memory_order_acquire)->by_name) out.push_back(state);
  return out;
}

bool PeerDirectory::add(std::unique_ptr<PeerState> state) {
  std::lock_guard lock(mu_);
  const Snapshot& now = *current_.load(std::memory_order_relaxed);
  if (now.by_name.count(state->peer().node_id)) return false;
  auto next = std::make_unique<Snapshot>(now);
  next->by_name.emplace(state->peer().node_id, state.get());
  next->by_address.emplace(&state->peer(), state.get());
  states_.push_back(std::move(state));
  publish(std::move(next));
  return true;
}

PeerState* PeerDirectory::remove(std::string_view node_id) {
  std::lock_guard lock(mu_);
  const Snapshot& now = *current_.load(std::memory_order_relaxed);
  auto found = now.by_name.find(node_id);
  if (found == now.by_name.end()) return nullptr;
  PeerState* state = found->second;
  auto next = std::make_unique<Snapshot>(now);
  next->by_name.erase(std::string(node_id));
  next->by_address.erase(&state->peer());
  publish(std::move(next));
  return state;
}

std::vector<PeerState*> PeerDirectory::all() const {
  std::lock_guard lock(mu_);
  std::vector<PeerState*> out;
  for (const auto& state : states_) out.push_back(state.get());
  return out;
}

void PeerDirectory::destroy_all() {
  std::lock_guard lock(mu_);
  publish(std::make_unique<Snapshot>());
  states_.clear();
}

void PeerDirectory::publish(std::unique_ptr<Snapshot> next) {
  current_.store(next.get(), std::memory_order_release);
  snapshots_.push_back(std::move(next));
}

}  // namespace wcomm
