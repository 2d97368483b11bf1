// WcommCommunicator: the mesh over wcomm's own Comm (shared memory or Unix sockets on one
// host, TCP or UCX between hosts), for speed where every entity runs wcomm. Not
// wire-compatible with pyzmq.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wcomm/mesh/communicator.h"
#include "wcomm/mesh/endpoints.h"

namespace wcomm::mesh {

struct WcommOptions {
  // SHM: shared-memory rings (set up over a Unix socket per entity); IPC: a Unix socket per
  // entity; TCP: loopback or LAN; RDMA: wcomm's ucx transport (UCX: RDMA where there is
  // RDMA, else its tcp and shared-memory transports). Only that transport, never a fallback.
  CommProtocol protocol = CommProtocol::kShm;
  std::string ipc_socket_path_prefix = std::string(kDefaultIpcPrefix);
  std::shared_ptr<const Codec> codec = {};  // none: PickleCodec
  // Comm has a fixed peer directory: every entity that sends to this one must be in
  // push_ids or here (a sender missing from it is refused by the handshake).
  std::vector<std::string> peer_ids = {};
  // Messages in flight to one peer before send blocks and try_send_bytes says false;
  // none: MSTAR_ZMQ_SNDHWM, else 100000.
  std::optional<int> sndhwm = {};
  // Received messages held before this entity stops reading its peers (they then block).
  std::size_t max_inbox_messages = 100000;
  // How long a blocking get or poll reads its peers' connections without sleeping first
  // (CommConfig::recv_busy_poll_us); none: WCOMM_RECV_BUSY_POLL_US, else Comm's default.
  std::optional<std::uint64_t> recv_busy_poll_us = {};
  bool anchor_lock = true;
};

class WcommCommunicator : public Communicator {
 public:
  WcommCommunicator(std::string my_id, std::vector<std::string> push_ids, WcommOptions options = {});
  ~WcommCommunicator() override;

  void send_bytes(std::string_view entity_id, std::string_view data) override;
  bool try_send_bytes(std::string_view entity_id, std::string_view data) override;
  WaitResult wait(int timeout_ms, const std::vector<std::string>& writable_peers = {}) override;
  std::vector<std::string> take_all_bytes() override;
  std::string endpoint() const override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wcomm::mesh
