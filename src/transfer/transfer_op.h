// One posted transfer as the agent and its backend share it: what to move, its state (set
// once, pending -> done | error), and the lock a backend holds while it touches the memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <string>

#include "transfer/metadata.h"
#include "wcomm/xfer/types.h"

namespace wcomm::xfer {

struct RemoteAgent;

struct Transfer {
  std::uint64_t id = 0;
  Op op = Op::kWrite;
  DescList local;
  DescList remote;
  std::shared_ptr<RemoteAgent> peer;
  std::string notification;
  std::chrono::steady_clock::time_point deadline;

  // Set by release() or a timeout: a backend stops at its next step.
  std::atomic<bool> cancelled{false};
  // Chunks being copied right now (cma): release() waits for zero after setting cancelled,
  // so no byte moves after it returns.
  std::atomic<int> active_steps{0};

  // Backend progress (touched only by the backend that owns the transfer, under its lock).
  std::size_t next_desc = 0;
  std::uint64_t next_offset = 0;
  std::atomic<std::uint64_t> bytes_left{0};
  std::shared_ptr<void> backend_state;

  XferState state() const { return state_.load(std::memory_order_acquire); }
  std::string reason() const {
    std::lock_guard lock(mu_);
    return reason_;
  }
  // First call wins; returns whether this call decided the outcome.
  bool finish(XferState outcome, std::string why = {}) {
    std::lock_guard lock(mu_);
    if (state_.load(std::memory_order_relaxed) != XferState::kPending) return false;
    reason_ = std::move(why);
    state_.store(outcome, std::memory_order_release);
    return true;
  }

 private:
  mutable std::mutex mu_;
  std::string reason_;
  std::atomic<XferState> state_{XferState::kPending};
};

}  // namespace wcomm::xfer
