// WcommCommunicator: the mesh API over wcomm's Comm. Receiving: wcomm_inbox.h (recv callbacks
// on Comm's loop thread fill an inbox and signal an eventfd the owner polls); sending:
// wcomm_peer_out.h (one Comm send in flight per peer, batches behind it).
#include "wcomm/mesh/wcomm_communicator.h"

#include <poll.h>
#include <sys/eventfd.h>

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
  std::shared_ptr<Inbox> inbox;
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
  spec.comm.connect_timeout_s = 60.0;  // a peer may start a while after us, as with ZeroMQ
  // What Comm holds unreceived per peer is part of this entity's inbox bound: past it, peers
  // are pushed back (their sends block) instead of being read without limit.
  spec.comm.max_peer_unreceived_messages =
      std::min<std::uint64_t>(spec.comm.max_peer_unreceived_messages, std::max<std::size_t>(1, options.max_inbox_messages));
  im.comm = Comm::create(std::move(spec));

  im.inbox = std::make_shared<Inbox>();
  im.inbox->my_id = me;
  im.inbox->max_messages = std::max<std::size_t>(1, options.max_inbox_messages);
  im.inbox->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (im.inbox->fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd for the mesh inbox");
  for (const Peer& p : im.comm->peers()) arm_recv(im.comm, im.inbox, im.comm->peer(p.node_id));
}

WcommCommunicator::~WcommCommunicator() {
  {
    std::lock_guard lock(impl_->inbox->mu);
    impl_->inbox->closed = true;
  }
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
  Inbox& inbox = *impl_->inbox;
  std::vector<std::string> out;
  std::vector<const Peer*> parked;
  {
    std::lock_guard lock(inbox.mu);
    out.assign(std::make_move_iterator(inbox.messages.begin()), std::make_move_iterator(inbox.messages.end()));
    inbox.messages.clear();
    inbox.reset_signal();
    parked.swap(inbox.parked);
  }
  for (const Peer* p : parked) arm_recv(impl_->comm, impl_->inbox, *p);
  return out;
}

Communicator::WaitResult WcommCommunicator::wait(int timeout_ms, const std::vector<std::string>& writable_peers) {
  WaitResult r;
  auto writable = [&] {
    for (const std::string& id : writable_peers)
      if (impl_->peer_out(id).has_room()) return true;
    return false;
  };
  if ((r.writable = writable())) return r;
  // A full peer's sends complete on the loop thread, which signals nothing here: while one is
  // wanted, wait in short slices and look again.
  constexpr int kSliceMs = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Inbox& inbox = *impl_->inbox;
  while (true) {
    int slice = timeout_ms;
    if (!writable_peers.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      slice = timeout_ms < 0 ? kSliceMs : static_cast<int>(std::clamp<long>(left.count(), 0, kSliceMs));
    }
    pollfd fds[2] = {{inbox.fd, POLLIN, 0}, {event_fd(), POLLIN, 0}};
    const int n = event_fd() >= 0 ? 2 : 1;
    while (::poll(fds, n, slice) < 0 && errno == EINTR) {
    }
    r.event = n == 2 && (fds[1].revents & POLLIN);
    if (r.event) drain_event();
    r.readable = fds[0].revents & POLLIN;
    r.writable = writable();
    if (r.readable || r.event || r.writable || writable_peers.empty() ||
        (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline))
      return r;
  }
}

std::string WcommCommunicator::endpoint() const { return impl_->endpoint; }

}  // namespace wcomm::mesh
