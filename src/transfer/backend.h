// The backend interface every transfer backend implements (cma, ucx, tcp): a small nixl-like
// engine the Agent drives. Backends report outcomes through the agent's completion function.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "transfer/metadata.h"
#include "transfer/registration_cache.h"
#include "transfer/transfer_op.h"
#include "wcomm/errors.h"
#include "wcomm/xfer/agent.h"
#include "wcomm/xfer/types.h"

namespace wcomm::xfer {

// A loaded peer. backend_state belongs to the backend chosen for it.
struct RemoteAgent {
  AgentMetadata meta;
  std::string raw;  // the metadata bytes it was loaded from
  BackendKind kind = BackendKind::kAuto;
  std::shared_ptr<void> backend_state;
};

// Called by a backend exactly once per transfer it started: Ok or the reason it failed.
// May run on any backend thread; it never blocks.
using CompletionFn = std::function<void(const std::shared_ptr<Transfer>&, Status)>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Capabilities capabilities() const = 0;
  // A merged region came or went (ucx maps it and packs an rkey).
  virtual Status add_region(const Range&) { return Ok{}; }
  virtual void remove_region(const Range&) {}
  // Memory this backend allocates and maps itself (ucx); nullptr when it does not.
  virtual void* allocate(std::size_t) { return nullptr; }
  virtual void release_allocation(void*) {}
  // Adds this backend's connection info to the agent's metadata.
  virtual void export_metadata(AgentMetadata&) const {}
  // Whether (and how) this backend reaches the peer; an error says why not.
  virtual Status connect(RemoteAgent& remote) = 0;
  virtual void disconnect(RemoteAgent&) {}
  // Starts a validated transfer; completes it later through the CompletionFn.
  virtual void start(const std::shared_ptr<Transfer>& transfer) = 0;
  // release() of a transfer still pending: stop using its memory soon (cma checks the
  // cancelled flag between chunks and needs nothing here).
  virtual void cancel(Transfer&) {}
};

// Whether [begin, end) lies inside this agent's registered memory (the tcp backend checks what
// a peer asks it to write or read).
using FindLocalFn = std::function<std::optional<Range>(std::uint64_t begin, std::uint64_t end)>;

std::unique_ptr<Backend> make_unselected_backend(BackendKind kind, BackendKind selected);
// A backend that reaches nobody and says why (capabilities().reason).
std::unique_ptr<Backend> make_unavailable_backend(BackendKind kind, std::string reason);
std::unique_ptr<Backend> make_cma_backend(const AgentConfig& config, CompletionFn done);
std::unique_ptr<Backend> make_ucx_backend(const AgentConfig& config, CompletionFn done);
std::unique_ptr<Backend> make_tcp_backend(const AgentConfig& config, std::uint64_t generation, CompletionFn done,
                                          FindLocalFn find_local);

}  // namespace wcomm::xfer
