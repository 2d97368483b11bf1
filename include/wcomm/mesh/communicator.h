// The entity mesh's communicator API (the seed's BaseCommunicator): named entities send each
// other messages; an entity drains everything that has arrived, or polls for it. Backends:
// ZmqCommunicator (wire-compatible with pyzmq meshes) and WcommCommunicator (wcomm's Comm).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wcomm/mesh/codec.h"
#include "wcomm/value.h"

namespace wcomm::mesh {

// The entity every deployment has exactly one of; its endpoint stands for the deployment (the
// anchor lock, anchor_lock.h, is taken next to it).
inline constexpr std::string_view kDeploymentAnchorEntity = "conductor";

enum class CommProtocol { kIpc, kTcp, kShm, kRdma };
const char* protocol_name(CommProtocol protocol);            // "IPC", "TCP", "SHM", "RDMA"
CommProtocol parse_protocol(std::string_view text);         // case-insensitive; InvalidArgumentError

// Single-threaded like a ZeroMQ socket: one thread calls everything except that an
// EventWakeup it polls on may be set from any thread. Messages between two entities arrive in
// the order they were sent.
class Communicator {
 public:
  explicit Communicator(std::string my_id, std::shared_ptr<const Codec> codec);
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const std::string& my_id() const { return my_id_; }
  const Codec& codec() const { return *codec_; }

  // Encodes msg with the codec and sends it to entity_id, blocking while that peer is at its
  // high-water mark (see OutboxCommunicator for a sender that must never block).
  void send(std::string_view entity_id, const Value& msg) { send_bytes(entity_id, codec_->encode(msg)); }
  // Every message that has arrived, decoded. blocking: first wait for one (or the registered
  // event) up to timeout_s (none: forever).
  std::vector<Value> get_all_new_messages(bool blocking = false, std::optional<double> timeout_s = {});

  // The same on encoded messages (for a caller with its own codec, e.g. Python's pickle).
  virtual void send_bytes(std::string_view entity_id, std::string_view data) = 0;
  // Sends without blocking: false, with nothing sent, when the peer is at its high-water mark.
  // Other failures (an unknown entity, a closed communicator) throw.
  virtual bool try_send_bytes(std::string_view entity_id, std::string_view data) = 0;
  std::vector<std::string> get_all_new_bytes(bool blocking = false, std::optional<double> timeout_s = {}) {
    if (blocking) wait(timeout_s ? static_cast<int>(*timeout_s * 1000) : -1);
    return take_all_bytes();
  }

  // Waits until a message is readable, the registered event fires, or timeout_ms passes
  // (negative: forever). True when a message waits (it stays queued for
  // get_all_new_messages); a fired event is drained and ends the wait with false.
  bool poll_for_messages(int timeout_ms = 20) { return wait(timeout_ms).readable; }
  void wait_for_work(int timeout_ms = 50) { wait(timeout_ms); }

  // What ended a wait (several may hold at once).
  struct WaitResult {
    bool readable = false;  // a message waits
    bool event = false;     // the registered event fired (and was drained)
    bool writable = false;  // one of the writable_peers can take a message again
  };
  // The wait behind poll_for_messages; it also ends when one of writable_peers (peers that
  // were at their high-water mark) can take a message again, so OutboxCommunicator's backlog
  // moves as soon as it can instead of at its next timeout.
  virtual WaitResult wait(int timeout_ms, const std::vector<std::string>& writable_peers = {}) = 0;
  // Every message that has arrived, without waiting.
  virtual std::vector<std::string> take_all_bytes() = 0;

  // Have poll_for_messages (and blocking gets) also end when the eventfd `fd` is readable.
  // The fd is not owned (an EventWakeup's, usually) and must outlive its registration; -1
  // unregisters. A wait with the fd closed throws std::system_error (EBADF), as pyzmq's poller
  // does: it would otherwise end at once every time, and a polling loop would spin.
  void register_event_for_poll(int fd) { event_fd_ = fd; }

  // The endpoint this entity receives on (ipc://..., tcp://..., unix://...).
  virtual std::string endpoint() const = 0;

 protected:
  // The registered event's fd (-1: none); throws std::system_error (EBADF) if it was closed.
  int event_fd() const;
  // Reads the registered event's counter, if it is set.
  void drain_event() const;

 private:
  std::string my_id_;
  std::shared_ptr<const Codec> codec_;
  int event_fd_ = -1;
};

}  // namespace wcomm::mesh
