// wcomm::xfer::Agent: one-sided transfers in the nixl style. Register memory, export
// metadata, load a peer's, post WRITE / READ between descriptor lists, poll, release.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wcomm/errors.h"
#include "wcomm/xfer/types.h"

namespace wcomm {
class Comm;
}

namespace wcomm::xfer {

struct AgentConfig {
  std::string name;                         // unique among the agents that talk to each other
  // One backend for every remote (the others are not started), or auto per remote.
  BackendKind backend = BackendKind::kAuto;
  // Optional. The tcp backend's data path and the channel notifications travel on. The
  // agent's metadata carries its node id and addresses, and add_remote adds a remote's node
  // as a peer when the Comm lacks it, so agents need no configured peers. A remote that
  // loaded our metadata first reaches us when this Comm accepts joins
  // (CommConfig::accept_unknown_peers); the agent follows peers that join. The Agent
  // receives on Comm tags kFirstReservedTag and up: leave those alone.
  std::shared_ptr<Comm> comm = {};
  unsigned cma_threads = 2;                // workers that run cma transfers (no fewer than 1)
  std::size_t chunk_bytes = 1u << 20;     // cma: the unit workers share a transfer in and take turns by
  std::chrono::duration<double> default_timeout = std::chrono::seconds(30);
  // Yama ptrace_scope 1 lets only an ancestor use cma on this process; with this set the
  // agent allows any process of the same user instead (prctl PR_SET_PTRACER_ANY), so a
  // peer that is not our ancestor can write to us. Off: such peers fall back to ucx / tcp.
  bool allow_cma_from_any_process = true;
};

inline constexpr std::uint32_t kFirstReservedTag = 0x7866'0000;  // "xf": tags the Agent uses

struct PostOptions {
  std::string notification = {};  // delivered to the remote agent after the bytes (needs a Comm)
  std::chrono::duration<double> timeout = std::chrono::duration<double>::zero();  // 0: the default
};

// Thread-safe. Transfers run on backend threads (cma workers, the ucx progress thread, the
// Comm's loop for tcp); many are in flight at once and a large one yields between chunks, so
// none waits behind another. poll() never blocks.
class Agent {
 public:
  // Throws InvalidArgumentError for a bad config, or when the backend asked for explicitly
  // is not available here (the message says why, e.g. ptrace permission).
  static std::unique_ptr<Agent> create(AgentConfig config);
  virtual ~Agent() = default;

  virtual const std::string& name() const = 0;
  // Changes with every process that runs an agent of this name (nanoseconds at creation), so
  // metadata from a previous incarnation is older and is refused.
  virtual std::uint64_t generation() const = 0;

  // What each backend can do here (never throws). kAuto: the union of the available ones.
  virtual Capabilities capabilities(BackendKind kind) const = 0;

  // Memory a remote may write to or read from, and local memory posts use. Overlapping or
  // touching ranges merge into one backend registration; deregister takes back exactly one
  // earlier register_memory of the same range. Metadata exported before a change is stale
  // for the new ranges: export it again.
  virtual Status register_memory(const void* addr, std::size_t len) = 0;
  virtual Status deregister(const void* addr, std::size_t len) = 0;
  // Memory the agent allocates and registers for you, from the backend that reaches it
  // fastest: with ucx available, ucp_mem_map(ALLOCATE), i.e. shared memory a same-host UCX
  // peer maps and copies into directly (UCX's shared-memory transports cannot do that with
  // memory they did not allocate); else page-aligned anonymous memory. Free it with
  // free_memory (which deregisters it).
  virtual Result<void*> allocate_memory(std::size_t len) = 0;
  virtual Status free_memory(void* addr) = 0;
  // The merged registered ranges (ascending), for tests and diagnostics.
  virtual DescList registered() const = 0;

  // This agent as plain msgpack: name, generation, host, registered ranges and each
  // backend's connection info (numbers and byte strings; no backend object).
  virtual std::string metadata() const = 0;
  // Loads a peer from its metadata and picks the backend for it. Refused (InvalidArgument)
  // for metadata that is malformed, our own, older than the generation already loaded for
  // that name, or from a process that is gone. Returns the remote's name.
  virtual Result<std::string> add_remote(std::string_view metadata) = 0;
  virtual Status remove_remote(const std::string& remote) = 0;
  virtual Result<BackendKind> backend_for(const std::string& remote) const = 0;

  // Starts moving bytes: local[i] <-> remote_descs[i] (same count, same lengths, each inside
  // registered memory on its side). Errors in the request are returned at once; failures
  // while moving show up in poll().
  virtual Result<XferHandle> post(Op op, const DescList& local, const std::string& remote,
                                  const DescList& remote_descs, PostOptions options = {}) = 0;
  // Pending, done, or error with the reason (including "timed out after ..."). Never blocks.
  virtual XferStatus poll(XferHandle handle) = 0;
  // Blocks until the transfer is no longer pending or timeout passes (then it is still
  // pending, unless its own deadline passed too), sleeping rather than spinning; returns
  // what poll() would.
  virtual XferStatus wait(XferHandle handle, std::chrono::duration<double> timeout) = 0;
  // Forgets a transfer; one still running is stopped first (returns once no backend touches
  // its memory any more). Unknown handle: InvalidArgument.
  virtual Status release(XferHandle handle) = 0;

  // Notifications remote agents attached to transfers into this agent or sent on their own,
  // oldest first.
  virtual std::vector<Notification> take_notifications() = 0;
  // A notification on its own (nixl's send_notif) to a remote loaded with add_remote, over
  // the agent's Comm (InvalidArgument without one). Blocks until the Comm took it or timeout
  // passed (the error says which); not from a callback on that Comm's loop thread.
  virtual Status send_notification(const std::string& remote, const std::string& message,
                                   std::chrono::duration<double> timeout) = 0;
};

}  // namespace wcomm::xfer
