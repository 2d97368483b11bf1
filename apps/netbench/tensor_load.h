// Latency under load with a "tensor" background (wcomm; needs a wcomm responder): the load is
// tensors sent over the very Comm connection the foreground pings use, initiator to
// responder, so the pings show head-of-line blocking behind them (or, with chunked frames,
// how little of it is left). The responder drains them on kTensorLoadTag.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>

#include "netbench/load_client.h"
#include "netbench/protocol.h"
#include "wcomm/comm.h"

namespace wcomm::bench {

inline constexpr std::uint32_t kTensorLoadTag = 0xFFFFFF02u;

class TensorLoad {
 public:
  // Asks the responder to drain (`tensor_load` start) and prepares a tensor of tensor_bytes
  // (random bytes: compression does not shrink them). target_mbps: the load's rate (paced
  // between tensors; at most two in flight).
  TensorLoad(ControlChannel& control, std::uint64_t tensor_bytes, double target_mbps, double duration_s);
  ~TensorLoad();
  TensorLoad(const TensorLoad&) = delete;
  TensorLoad& operator=(const TensorLoad&) = delete;

  void go();
  // Waits for the sender, ends the responder's drain (`tensor_load` stop) and returns the
  // bytes sent and the time from go until the responder had them all.
  LoadResult wait();

 private:
  void run();
  ControlChannel& control_;
  Tensor tensor_;
  double target_mbps_, duration_s_;
  std::thread thread_;
  std::atomic<std::uint64_t> sent_{0};
  std::optional<Error> error_;
  std::chrono::steady_clock::time_point started_;
};

// Responder side: drains kTensorLoadTag until the initiator's end marker (None), counting bytes.
class TensorDrain {
 public:
  TensorDrain(Comm& comm, const Peer& peer, Seconds timeout);
  ~TensorDrain();
  // Joins the drain (the end marker must be on its way) and returns the bytes received.
  std::uint64_t finish();

 private:
  std::thread thread_;
  std::atomic<std::uint64_t> received_{0};
};

}  // namespace wcomm::bench
