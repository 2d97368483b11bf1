// Plain types of the one-sided transfer engine (wcomm::xfer): descriptors, operations,
// backends, capabilities and a transfer's status. No I/O here.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace wcomm::xfer {

// One contiguous piece of memory: an address in the owning process, a length, and the device
// it lives on (0: host memory, the only kind the backends here move).
struct Desc {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  std::uint32_t dev_id = 0;
  friend bool operator==(const Desc&, const Desc&) = default;
};
using DescList = std::vector<Desc>;

// WRITE: local -> remote. READ: remote -> local. Either way the remote runs no code per byte.
enum class Op { kWrite, kRead };

// kAuto picks per remote: cma on the same host, ucx otherwise, tcp last.
enum class BackendKind { kAuto, kCma, kUcx, kTcp };
const char* backend_name(BackendKind kind);  // "auto", "cma", "ucx", "tcp"
// "auto" / "cma" / "ucx" / "tcp"; throws InvalidArgumentError naming the bad text.
BackendKind parse_backend(const std::string& text);

// What a backend can do on this agent, asked instead of tried (nixl's capability queries).
struct Capabilities {
  BackendKind kind = BackendKind::kAuto;
  bool available = false;      // usable here at all; if not, `reason` says why
  std::string reason;          // why not available ("" when available)
  bool write = false;
  bool read = false;
  bool same_host_only = false;  // cma: only a process on this host can be a peer
  bool notifications = false;   // a post may carry a notification for the remote agent
  bool device_memory = false;   // dev_id != 0 (none of ours: host memory only)
};

enum class XferState { kPending, kDone, kError };
const char* xfer_state_name(XferState state);  // "pending", "done", "error"

struct XferStatus {
  XferState state = XferState::kPending;
  std::string reason;  // why it failed (kError only)
};

// A posted transfer, owned by the Agent that posted it until release(). Only an id: it is
// never a pointer in disguise.
struct XferHandle {
  std::uint64_t id = 0;
  friend bool operator==(const XferHandle&, const XferHandle&) = default;
};

// A notification a remote agent attached to a transfer that targeted this agent (delivered
// after the transfer's bytes are in place).
struct Notification {
  std::string remote;  // the posting agent's name
  std::string message;
};

}  // namespace wcomm::xfer
