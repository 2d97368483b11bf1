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

  // Waits for the PULL socket or the event fd; true when the PULL socket is readable.
  bool wait(long timeout_ms, int event_fd, bool& event_fired) {
    zmq::pollitem_t items[2] = {{pull.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, event_fd, ZMQ_POLLIN, 0}};
    const int n = event_fd >= 0 ? 2 : 1;
    try {
      zmq::poll(items, n, std::chrono::milliseconds(timeout_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      return false;  // a signal ends the wait early, as a timeout would
    }
    event_fired = n == 2 && (items[1].revents & ZMQ_POLLIN);
    return items[0].revents & ZMQ_POLLIN;
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

std::vector<std::string> ZmqCommunicator::get_all_new_bytes(bool blocking, std::optional<double> timeout_s) {
  Impl& im = *impl_;
  if (blocking) {
    bool fired = false;
    im.wait(timeout_s ? static_cast<long>(*timeout_s * 1000) : -1, event_fd(), fired);
    if (fired) drain_event();
  }
  std::vector<std::string> out;
  zmq::message_t m;
  while (im.pull.recv(m, zmq::recv_flags::dontwait)) out.emplace_back(m.data<char>(), m.size());
  return out;
}

bool ZmqCommunicator::poll_for_messages(int timeout_ms) {
  bool fired = false;
  const bool readable = impl_->wait(timeout_ms, event_fd(), fired);
  if (fired) drain_event();
  return readable;
}

std::string ZmqCommunicator::endpoint() const { return impl_->endpoint; }
CommProtocol ZmqCommunicator::protocol() const { return impl_->protocol; }
int ZmqCommunicator::sndhwm() const { return impl_->sndhwm; }

}  // namespace wcomm::mesh
