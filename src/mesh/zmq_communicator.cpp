// ZmqCommunicator: libzmq through cppzmq, with exactly a pyzmq entity's sockets (mesh-zmq.md).
#include "wcomm/mesh/zmq_communicator.h"

#include <zmq.hpp>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>

#include "wcomm/errors.h"
#include "wcomm/mesh/anchor_lock.h"

namespace wcomm::mesh {

struct ZmqCommunicator::Impl {
  CommProtocol protocol;
  std::string prefix;
  std::string endpoint;
  int sndhwm;
  zmq::context_t context{1};
  zmq::socket_t pull;
  std::map<std::string, zmq::socket_t, std::less<>> push;
  std::optional<AnchorLock> anchor;

  zmq::socket_t& push_socket(std::string_view id) {
    auto it = push.find(id);
    if (it != push.end()) return it->second;
    zmq::socket_t s(context, zmq::socket_type::push);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::sndhwm, sndhwm);  // before connect, as pyzmq does
    const std::string to = zmq_endpoint(id, protocol, prefix);
    try {
      s.connect(to);
    } catch (const zmq::error_t& e) {
      throw InvalidArgumentError("cannot connect to entity '" + std::string(id) + "' at " + to + ": " + e.what());
    }
    return push.emplace(std::string(id), std::move(s)).first->second;
  }

  // Polls the PULL socket, the event fd and (for POLLOUT) the PUSH sockets of writable_peers.
  WaitResult wait(long timeout_ms, int event_fd, const std::vector<std::string>& writable_peers) {
    std::vector<zmq::pollitem_t> items = {{pull.handle(), 0, ZMQ_POLLIN, 0}};
    if (event_fd >= 0) items.push_back({nullptr, event_fd, ZMQ_POLLIN, 0});
    const std::size_t first_push = items.size();
    for (const std::string& id : writable_peers) items.push_back({push_socket(id).handle(), 0, ZMQ_POLLOUT, 0});
    WaitResult r;
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      return r;  // a signal ends the wait early, as a timeout would
    }
    r.readable = items[0].revents & ZMQ_POLLIN;
    r.event = event_fd >= 0 && (items[1].revents & ZMQ_POLLIN);
    for (std::size_t i = first_push; i < items.size(); ++i) r.writable |= (items[i].revents & ZMQ_POLLOUT) != 0;
    return r;
  }
};

ZmqCommunicator::ZmqCommunicator(std::string my_id, std::vector<std::string> push_ids, ZmqOptions options)
    : Communicator(std::move(my_id), std::move(options.codec)), impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  im.protocol = transport_from_env(options.protocol);
  im.prefix = options.ipc_socket_path_prefix;
  im.sndhwm = options.sndhwm ? *options.sndhwm
                             : static_cast<int>(env_integer("MSTAR_ZMQ_SNDHWM", 100000, 0, INT32_MAX));
  im.endpoint = zmq_endpoint(this->my_id(), im.protocol, im.prefix);
  if (im.protocol == CommProtocol::kIpc) {
    std::error_code ec;
    std::filesystem::create_directories(im.prefix, ec);
    if (ec) throw InvalidArgumentError("cannot create the IPC directory " + im.prefix + ": " + ec.message());
  }
  if (options.anchor_lock && this->my_id() == kDeploymentAnchorEntity) im.anchor.emplace(im.endpoint);
  im.pull = zmq::socket_t(im.context, zmq::socket_type::pull);
  im.pull.set(zmq::sockopt::linger, 0);
  if (options.rcvhwm) im.pull.set(zmq::sockopt::rcvhwm, *options.rcvhwm);
  try {
    im.pull.bind(im.endpoint);
  } catch (const zmq::error_t& e) {
    throw ConnectionFailedError("entity '" + this->my_id() + "' cannot bind " + im.endpoint + ": " + e.what() +
                                " (is another process this entity?)");
  }
  for (const std::string& id : push_ids)
    if (id != this->my_id()) im.push_socket(id);
}

ZmqCommunicator::~ZmqCommunicator() = default;

void ZmqCommunicator::send_bytes(std::string_view entity_id, std::string_view data) {
  impl_->push_socket(entity_id).send(zmq::const_buffer(data.data(), data.size()), zmq::send_flags::none);
}

bool ZmqCommunicator::try_send_bytes(std::string_view entity_id, std::string_view data) {
  return impl_->push_socket(entity_id)
      .send(zmq::const_buffer(data.data(), data.size()), zmq::send_flags::dontwait)
      .has_value();
}

Communicator::WaitResult ZmqCommunicator::wait(int timeout_ms, const std::vector<std::string>& writable_peers) {
  WaitResult r = impl_->wait(timeout_ms, event_fd(), writable_peers);
  if (r.event) drain_event();
  return r;
}

std::vector<std::string> ZmqCommunicator::take_all_bytes() {
  std::vector<std::string> out;
  zmq::message_t m;
  while (impl_->pull.recv(m, zmq::recv_flags::dontwait)) out.emplace_back(m.data<char>(), m.size());
  return out;
}

std::string ZmqCommunicator::endpoint() const { return impl_->endpoint; }
CommProtocol ZmqCommunicator::protocol() const { return impl_->protocol; }
int ZmqCommunicator::sndhwm() const { return impl_->sndhwm; }

}  // namespace wcomm::mesh
