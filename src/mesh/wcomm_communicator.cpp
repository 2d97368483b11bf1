// WcommCommunicator: the mesh API over wcomm's Comm. Receiving: wcomm_inbox.h (the owner's
// waits read the peers' connections themselves); sending: wcomm_peer_out.h (one Comm send in
// flight per peer, batches behind it).
#include "wcomm/mesh/wcomm_communicator.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "wcomm/errors.h"
#include "wcomm/mesh/anchor_lock.h"
#include "wcomm_inbox.h"
#include "wcomm_peer_out.h"

namespace wcomm::mesh {
namespace {
// Comm's node_id of an entity. On one host (IPC, SHM) Comm also listens at a same-host name
// made from the node_id, so two meshes with a worker_0 each would meet there: the id is
// qualified with the mesh's IPC prefix. Over TCP and RDMA (several hosts, maybe several
// prefixes) it is the entity id itself.
std::string node_id_for(const std::string& id, CommProtocol protocol, const std::string& prefix) {
  if (protocol == CommProtocol::kTcp || protocol == CommProtocol::kRdma) return id;
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a: the same in every process
  for (char c : std::filesystem::path(prefix).lexically_normal().string()) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return id + "." + hex;
}

// Comm's transport for a protocol: only that one (no fallback to another).
const char* comm_transport(CommProtocol protocol) {
  switch (protocol) {
    case CommProtocol::kShm: return "shm";
    case CommProtocol::kIpc: return "unix";
    case CommProtocol::kRdma: return "ucx";
    case CommProtocol::kTcp: break;
  }
  return "tcp";
}

Peer entity_peer(const std::string& id, CommProtocol protocol, const std::string& prefix) {
  Address address = Address::parse(wcomm_endpoint(id, protocol, prefix));
  Peer peer{node_id_for(id, protocol, prefix)};
  if (address.scheme == "tcp") {
    peer.host = address.host;
    peer.port = address.port;
  } else {
    peer.addresses.push_back(address);
  }
  return peer;
}

}  // namespace
struct WcommCommunicator::Impl {
  std::string endpoint;
  CommProtocol protocol;
  std::string prefix;
  std::vector<std::string> entities;  // the directory, as entity ids
  std::size_t sndhwm = 0;
  std::optional<AnchorLock> anchor;
  std::shared_ptr<Comm> comm;
  std::optional<Inbox> inbox;
  std::map<std::string, std::shared_ptr<PeerOut>, std::less<>> out;

  PeerOut& peer_out(std::string_view id) {
    auto it = out.find(id);
    if (it != out.end()) return *it->second;
    const Peer* p;
    try {
      p = &comm->peer(node_id_for(std::string(id), protocol, prefix));
    } catch (const std::out_of_range&) {
      std::string known;
      for (const std::string& e : entities) known += (known.empty() ? "" : ", ") + e;
      throw InvalidArgumentError("entity '" + std::string(id) +
                                 "' is not in this wcomm entity's directory (push_ids and peer_ids: " + known +
                                 "); the wcomm transport needs every peer listed up front");
    }
    auto po = std::make_shared<PeerOut>();
    po->id = std::string(id);
    po->peer = p;
    po->hwm = sndhwm;
    po->comm = comm;
    return *out.emplace(std::string(id), std::move(po)).first->second;
  }
  std::shared_ptr<PeerOut> shared(PeerOut& po) { return out.find(po.id)->second; }
};

WcommCommunicator::WcommCommunicator(std::string my_id, std::vector<std::string> push_ids, WcommOptions options)
    : Communicator(std::move(my_id), std::move(options.codec)), impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  const std::string& me = this->my_id();
  im.endpoint = wcomm_endpoint(me, options.protocol, options.ipc_socket_path_prefix);
  im.sndhwm = options.sndhwm ? static_cast<std::size_t>(*options.sndhwm)
                             : static_cast<std::size_t>(env_integer("MSTAR_ZMQ_SNDHWM", 100000, 1, INT32_MAX));
  if (im.sndhwm == 0) im.sndhwm = 1;
  if (options.protocol == CommProtocol::kIpc || options.protocol == CommProtocol::kShm) {
    std::error_code ec;
    std::filesystem::create_directories(options.ipc_socket_path_prefix, ec);
    if (ec)
      throw InvalidArgumentError("cannot create the IPC directory " + options.ipc_socket_path_prefix + ": " +
                                 ec.message());
  }
  if (options.anchor_lock && me == kDeploymentAnchorEntity) im.anchor.emplace(im.endpoint);

  CommSpec spec;
  spec.local = entity_peer(me, options.protocol, options.ipc_socket_path_prefix);
  std::set<std::string> ids(push_ids.begin(), push_ids.end());
  ids.insert(options.peer_ids.begin(), options.peer_ids.end());
  ids.erase(me);
  for (const std::string& id : ids) spec.peers.push_back(entity_peer(id, options.protocol, options.ipc_socket_path_prefix));
  im.protocol = options.protocol;
  im.prefix = options.ipc_socket_path_prefix;
  im.entities.assign(ids.begin(), ids.end());
  spec.comm.transport = comm_transport(options.protocol);
  // The mesh counts messages in flight itself (sndhwm); Comm's own bound must not refuse first.
  spec.comm.max_peer_queued_messages = im.sndhwm + 1;
  spec.comm.max_peer_queued_bytes = std::max<std::uint64_t>(spec.comm.max_peer_queued_bytes, 1ull << 30);
  spec.comm.recv_busy_poll_us = options.recv_busy_poll_us.value_or(static_cast<std::uint64_t>(
      env_integer("WCOMM_RECV_BUSY_POLL_US", static_cast<long>(spec.comm.recv_busy_poll_us), 0, 1000000)));
  spec.comm.connect_timeout_s = 60.0;  // a peer may start a while after us, as with ZeroMQ
  // What Comm holds unreceived per peer is part of this entity's inbox bound: past it, peers
  // are pushed back (their sends block) instead of being read without limit.
  spec.comm.max_peer_unreceived_messages =
      std::min<std::uint64_t>(spec.comm.max_peer_unreceived_messages, std::max<std::size_t>(1, options.max_inbox_messages));
  im.comm = Comm::create(std::move(spec));

  im.inbox.emplace(im.comm, me, options.max_inbox_messages);
}

WcommCommunicator::~WcommCommunicator() {
  for (auto& [id, po] : impl_->out) {
    std::lock_guard lock(po->mu);
    po->closed = true;
  }
  impl_->comm->close();
}

void WcommCommunicator::send_bytes(std::string_view entity_id, std::string_view data) {
  PeerOut& po = impl_->peer_out(entity_id);
  std::unique_lock lock(po.mu);
  po.room.wait(lock, [&] { return !po.full_locked(data.size()) || po.closed; });  // the high-water mark
  if (po.closed) throw ClosedError("the mesh communicator is closed");
  po.enqueue(lock, data, impl_->shared(po));
}

bool WcommCommunicator::try_send_bytes(std::string_view entity_id, std::string_view data) {
  PeerOut& po = impl_->peer_out(entity_id);
  std::unique_lock lock(po.mu);
  if (po.closed) throw ClosedError("the mesh communicator is closed");
  if (po.full_locked(data.size())) return false;
  po.enqueue(lock, data, impl_->shared(po));
  return true;
}

std::vector<std::string> WcommCommunicator::take_all_bytes() {
  impl_->inbox->collect();
  return impl_->inbox->take_all();
}

Communicator::WaitResult WcommCommunicator::wait(int timeout_ms, const std::vector<std::string>& writable_peers) {
  WaitResult r;
  auto writable = [&] {
    for (const std::string& id : writable_peers)
      if (impl_->peer_out(id).has_room()) return true;
    return false;
  };
  auto event_fired = [&] {
    pollfd fd{event_fd(), POLLIN, 0};
    return event_fd() >= 0 && ::poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN);
  };
  if ((r.writable = writable())) return r;
  // A full peer's sends complete on the loop thread, which signals nothing here: while one is
  // wanted, wait in short slices and look again.
  constexpr int kSliceMs = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Inbox& inbox = *impl_->inbox;
  while (true) {
    std::optional<Seconds> slice;
    if (timeout_ms >= 0) slice = Seconds(timeout_ms / 1000.0);
    if (!writable_peers.empty()) {
      const auto left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now());
      slice = Seconds(timeout_ms < 0 ? kSliceMs / 1000.0 : std::clamp(left.count(), 0.0, kSliceMs / 1000.0));
    }
    inbox.wait(slice, event_fd());
    if ((r.event = event_fired())) drain_event();
    r.readable = !inbox.empty();
    r.writable = writable();
    if (r.readable || r.event || r.writable || writable_peers.empty() ||
        (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline))
      return r;
  }
}

std::string WcommCommunicator::endpoint() const { return impl_->endpoint; }

}  // namespace wcomm::mesh
