// Completions handed from a Comm's loop thread to the Python (asyncio) thread: a locked queue
// plus an eventfd that asyncio watches with add_reader. The loop thread only pushes C++ values
// here, so it never needs the GIL; Python drains the whole queue in one call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <variant>
#include <vector>

#include "wcomm/comm.h"

namespace wcomm::python {

// An operation's result, or (op_id 0) a peer event.
struct Completion {
  std::uint64_t op_id = 0;
  std::variant<Result<SendResult>, Result<Received>, PeerEvent> result;
};

class CompletionQueue {
 public:
  CompletionQueue();
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // The eventfd: readable while completions may be waiting.
  int fd() const { return fd_; }

  // Any thread. Signals the eventfd only when the queue goes from empty to non-empty: one
  // wake-up per batch, however many completions the batch holds.
  void push(Completion completion);

  // The consumer (the Python thread): clears the eventfd first, then takes everything, so a
  // push that races with it either lands in this batch or signals again.
  std::vector<Completion> take();

  // Waits, spinning (no sleep), up to `limit` for a completion to be queued; true if one is.
  // Lets a caller that expects a completion within microseconds skip the wake-up of a sleeping
  // event loop.
  bool spin_until_nonempty(std::chrono::microseconds limit) const;

 private:
  int fd_ = -1;
  std::mutex mu_;
  std::vector<Completion> items_;
  std::atomic<bool> nonempty_{false};  // items_ is non-empty (read without the lock)
};

}  // namespace wcomm::python
