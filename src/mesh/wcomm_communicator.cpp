// WcommCommunicator: the mesh API over wcomm's Comm. Every peer has one recv outstanding whose
// callback (on Comm's loop thread) moves the message to an inbox and signals an eventfd the
// owner's thread polls; sends are Comm sends whose futures are counted against the
// high-water mark instead of waited on one by one.
#include "wcomm/mesh/wcomm_communicator.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "wcomm/comm.h"
#include "wcomm/errors.h"
#include "wcomm/mesh/anchor_lock.h"

namespace wcomm::mesh {
namespace {

// What the loop thread's recv callbacks share with the owner; outlives the communicator
// while a callback may still run.
struct Inbox {
  std::string my_id;
  std::mutex mu;
  std::deque<std::string> messages;     // under mu
  std::vector<const Peer*> parked;      // under mu: peers not read while the inbox is full
  bool closed = false;                  // under mu
  std::size_t max_messages = 0;
  int fd = -1;                          // eventfd: readable while messages is not empty

  ~Inbox() {
    if (fd >= 0) ::close(fd);
  }
  void signal() {
    const std::uint64_t one = 1;
    while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
  void reset_signal() {
    std::uint64_t count;
    while (::read(fd, &count, sizeof count) < 0 && errno == EINTR) {
    }
  }
};

void arm_recv(const std::shared_ptr<Comm>& comm, const std::shared_ptr<Inbox>& inbox, const Peer& peer) {
  std::weak_ptr<Comm> weak_comm = comm;
  comm->recv(peer).then([weak_comm, inbox, peer = &peer](Result<Received> got) {
    {
      std::lock_guard lock(inbox->mu);
      if (inbox->closed) return;
      if (got.ok()) {
        if (const Bytes* b = got.value().value.get_if<Bytes>()) {
          if (inbox->messages.empty()) inbox->signal();
          inbox->messages.emplace_back(b->view());
        } else {
          spdlog::error("mesh entity '{}': dropped a message from '{}' that is not a mesh message (bytes): {}",
                        inbox->my_id, peer->node_id, summarize(got.value().value));
        }
        if (inbox->messages.size() >= inbox->max_messages) {
          inbox->parked.push_back(peer);  // read again once the owner drains
          return;
        }
      } else if (got.error().code == ErrorCode::kClosed) {
        return;
      } else if (got.error().code == ErrorCode::kConnectionClosed) {
        // A peer that exits or restarts: routine in a mesh; the next recv waits for it.
        spdlog::debug("mesh entity '{}': '{}' went away: {}", inbox->my_id, peer->node_id, got.error().message);
      } else {
        spdlog::warn("mesh entity '{}': receiving from '{}': {}", inbox->my_id, peer->node_id, got.error().message);
      }
    }
    if (auto comm = weak_comm.lock()) arm_recv(comm, inbox, *peer);
  });
}

Peer entity_peer(const std::string& id, CommProtocol protocol, const std::string& prefix) {
  Address address = Address::parse(wcomm_endpoint(id, protocol, prefix));
  Peer peer{id};
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
  std::size_t sndhwm = 0;
  std::optional<AnchorLock> anchor;
  std::shared_ptr<Comm> comm;
  std::shared_ptr<Inbox> inbox;
  // Sends not yet completed, oldest first, per peer: their count is the peer's fill level.
  std::map<std::string, std::deque<Future<SendResult>>, std::less<>> in_flight;

  const Peer& peer(std::string_view id) {
    try {
      return comm->peer(id);
    } catch (const std::out_of_range&) {
      std::string known;
      for (const Peer& p : comm->peers()) known += (known.empty() ? "" : ", ") + p.node_id;
      throw InvalidArgumentError("entity '" + std::string(id) +
                                 "' is not in this wcomm entity's directory (push_ids and peer_ids: " + known +
                                 "); the wcomm transport needs every peer listed up front");
    }
  }

  // Forgets completed sends at the front of a peer's queue; a failed one is logged (its
  // caller has moved on, and the messages behind it were sent on their own).
  std::deque<Future<SendResult>>& settle(std::string_view id) {
    auto& q = in_flight[std::string(id)];
    while (!q.empty() && q.front().ready()) {
      Result<SendResult>& r = q.front().wait();
      if (!r.ok()) spdlog::error("mesh: a message to '{}' was lost: {}", id, r.error().message);
      q.pop_front();
    }
    return q;
  }

  void post(const Peer& p, std::string_view data, std::deque<Future<SendResult>>& q) {
    q.push_back(comm->send(Value(Bytes(data)), p));
  }
};

WcommCommunicator::WcommCommunicator(std::string my_id, std::vector<std::string> push_ids, WcommOptions options)
    : Communicator(std::move(my_id), std::move(options.codec)), impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  const std::string& me = this->my_id();
  im.endpoint = wcomm_endpoint(me, options.protocol, options.ipc_socket_path_prefix);  // RDMA throws here
  im.sndhwm = options.sndhwm ? static_cast<std::size_t>(*options.sndhwm)
                             : static_cast<std::size_t>(env_integer("MSTAR_ZMQ_SNDHWM", 100000, 1, INT32_MAX));
  if (im.sndhwm == 0) im.sndhwm = 1;
  if (options.protocol != CommProtocol::kTcp) {
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
  // The mesh counts messages in flight itself (sndhwm); Comm's own bound must not refuse first.
  spec.comm.max_peer_queued_messages = im.sndhwm + 1;
  spec.comm.max_peer_queued_bytes = std::max<std::uint64_t>(spec.comm.max_peer_queued_bytes, 1ull << 30);
  spec.comm.connect_timeout_s = 60.0;
  // What Comm holds unreceived per peer is part of this entity's inbox bound: past it, peers
  // are pushed back (their sends block) instead of being read without limit.
  spec.comm.max_peer_unreceived_messages =
      std::min<std::uint64_t>(spec.comm.max_peer_unreceived_messages, std::max<std::size_t>(1, options.max_inbox_messages));  // a peer may start a while after us, as with ZeroMQ
  im.comm = Comm::create(std::move(spec));
  im.endpoint = im.comm->addresses().front().to_string();

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
  impl_->comm->close();
}

void WcommCommunicator::send_bytes(std::string_view entity_id, std::string_view data) {
  const Peer& p = impl_->peer(entity_id);
  auto& q = impl_->settle(entity_id);
  while (q.size() >= impl_->sndhwm) {  // at the high-water mark: wait for the oldest
    q.front().wait();
    impl_->settle(entity_id);
  }
  impl_->post(p, data, q);
}

bool WcommCommunicator::try_send_bytes(std::string_view entity_id, std::string_view data) {
  const Peer& p = impl_->peer(entity_id);
  auto& q = impl_->settle(entity_id);
  if (q.size() >= impl_->sndhwm) return false;
  impl_->post(p, data, q);
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
      if (impl_->settle(id).size() < impl_->sndhwm) return true;
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
