// Bulk traffic of the throughput phases: pipelined sends of one shared zero-filled payload,
// and a receiver that only counts. The bench must never be the bottleneck it measures.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "wcomm/comm.h"

namespace wcomm::bench {

// One zero-filled buffer, grown on demand and never written after that; every payload is a
// shared view of its first `size` bytes, so a send costs no allocation and no copy.
class ZeroPayloads {
 public:
  Bytes bytes(std::size_t size);

 private:
  Buffer zeros_;
};

// How deep the send pipeline runs: enough messages in flight to keep the connection busy,
// bounded well inside Comm's default per-peer queue (1024 messages, 128 MiB).
struct SendWindow {
  std::uint64_t max_messages = 256;
  std::uint64_t max_bytes = 64ull << 20;
};

// Sends `count` frames of `size` zero bytes on `tag`, keeping up to a window of sends in
// flight, and returns when every one is written. Throws the first send's error.
void send_bulk(Comm& comm, const Peer& peer, ZeroPayloads& zeros, std::uint32_t tag, std::size_t size,
               std::uint64_t count, Seconds timeout, SendWindow window = {});

// Receives `count` frames on `tag`, keeping up to `window` receives posted; each completion
// is counted (and its payload dropped) on the loop thread, so nothing is copied or kept.
// Frames beyond the window wait in Comm's inbox (bounded; TCP pushes back past it).
class BulkReceiver {
 public:
  static constexpr std::uint64_t kDefaultWindow = 1024;

  BulkReceiver(Comm& comm, const Peer& peer, std::uint32_t tag, std::size_t expected_size, std::uint64_t count,
               Seconds timeout, std::uint64_t window = kDefaultWindow);
  // Returns when all messages arrived; throws the first failure (a timeout, a closed
  // connection, or a message that is not `expected_size` bytes).
  void wait();

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::uint64_t finished = 0;  // completions, failed ones included
    std::optional<std::string> problem;
    std::optional<Error> error;
  };
  void post(std::uint64_t n);

  Comm& comm_;
  const Peer& peer_;
  std::uint32_t tag_;
  std::size_t expected_size_;
  std::uint64_t count_;
  Seconds timeout_;
  std::uint64_t window_;
  std::uint64_t posted_ = 0;
  std::shared_ptr<State> state_;
};

}  // namespace wcomm::bench
