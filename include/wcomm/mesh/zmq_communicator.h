// ZmqCommunicator: the mesh over libzmq, wire-compatible with a pyzmq mesh (mesh-zmq.md): one
// PULL socket bound at the entity's endpoint, one PUSH per peer, LINGER 0, one frame per
// message. A C++ entity built on it can replace one pyzmq entity of a running mesh.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wcomm/mesh/communicator.h"
#include "wcomm/mesh/endpoints.h"

namespace wcomm::mesh {

struct ZmqOptions {
  CommProtocol protocol = CommProtocol::kIpc;  // MSTAR_ZMQ_TRANSPORT overrides it
  std::string ipc_socket_path_prefix = std::string(kDefaultIpcPrefix);
  std::shared_ptr<const Codec> codec = {};  // none: PickleCodec (what pyzmq entities speak)
  std::optional<int> sndhwm = {};  // PUSH high-water mark; none: MSTAR_ZMQ_SNDHWM, else 100000
  std::optional<int> rcvhwm = {};  // PULL high-water mark; none: ZeroMQ's default (1000)
  bool anchor_lock = true;         // the conductor takes the deployment anchor lock
};

class ZmqCommunicator : public Communicator {
 public:
  // Binds the PULL socket and connects a PUSH socket to each of push_ids (not to my_id).
  // Throws InvalidArgumentError for SHM / RDMA or a bad environment value,
  // ConnectionFailedError when the endpoint cannot be bound.
  ZmqCommunicator(std::string my_id, std::vector<std::string> push_ids, ZmqOptions options = {});
  ~ZmqCommunicator() override;

  void send_bytes(std::string_view entity_id, std::string_view data) override;
  bool try_send_bytes(std::string_view entity_id, std::string_view data) override;
  WaitResult wait(int timeout_ms, const std::vector<std::string>& writable_peers = {}) override;
  std::vector<std::string> take_all_bytes() override;
  std::string endpoint() const override;

  CommProtocol protocol() const;
  int sndhwm() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wcomm::mesh
