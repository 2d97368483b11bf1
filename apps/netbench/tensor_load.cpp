// The "tensor" background of latency under load: paced tensors over the foreground Comm.
#include "netbench/tensor_load.h"

#include <deque>
#include <random>
#include <stdexcept>

#include "netbench/json_value.h"

namespace wcomm::bench {

TensorLoad::TensorLoad(ControlChannel& control, std::uint64_t tensor_bytes, double target_mbps, double duration_s)
    : control_(control), target_mbps_(target_mbps), duration_s_(duration_s) {
  tensor_ = Tensor::empty(DType::kUInt8, {static_cast<std::int64_t>(tensor_bytes)});
  std::mt19937_64 random(17);
  auto* words = reinterpret_cast<std::uint64_t*>(tensor_.data());
  for (std::uint64_t i = 0; i < tensor_bytes / 8; ++i) words[i] = random();
  control_.send(Dict{{"op", "tensor_load"}, {"action", "start"}});
  control_.expect("tensor_load");
}

TensorLoad::~TensorLoad() {
  if (thread_.joinable()) thread_.join();
}

void TensorLoad::go() {
  started_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { run(); });
}

// Sends until duration_s, no faster than target_mbps (a tensor goes once the bytes before it
// are due), keeping at most two in flight so the queue never hides the rate; then the end marker.
void TensorLoad::run() {
  Comm& comm = control_.comm();
  const Peer& peer = control_.peer();
  const double rate = target_mbps_ * 1e6 / 8.0;  // bytes/s
  const CommOptions options{.tag = kTensorLoadTag, .timeout = control_.timeout()};
  std::deque<Future<SendResult>> in_flight;
  std::uint64_t queued = 0;
  try {
    for (;;) {
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      if (now >= duration_s_) break;
      const double due = rate > 0 ? static_cast<double>(queued) / rate : 0.0;
      if (due > now) {
        std::this_thread::sleep_for(std::chrono::duration<double>(std::min(due - now, duration_s_ - now)));
        continue;
      }
      while (in_flight.size() >= 2) {
        in_flight.front().wait().value();
        in_flight.pop_front();
        sent_ += tensor_.nbytes();
      }
      in_flight.push_back(comm.send(tensor_, peer, {}, options));
      queued += tensor_.nbytes();
    }
    for (auto& f : in_flight) {
      f.wait().value();
      sent_ += tensor_.nbytes();
    }
    comm.send(Value(), peer, {}, options).wait().value();  // the end marker
  } catch (const CommError& e) {
    error_ = Error{e.code(), e.what()};
  }
}

LoadResult TensorLoad::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) throw std::runtime_error("tensor background load: " + error_->message);
  control_.send(Dict{{"op", "tensor_load"}, {"action", "stop"}});
  Dict reply = control_.expect("tensor_load");
  LoadResult result;
  result.bytes_sent = sent_.load();
  result.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  result.connections = 1;
  (void)reply;
  return result;
}

TensorDrain::TensorDrain(Comm& comm, const Peer& peer, Seconds timeout) {
  thread_ = std::thread([this, &comm, &peer, timeout] {
    const CommOptions options{.tag = kTensorLoadTag, .timeout = timeout};
    for (;;) {
      auto next = comm.recv(peer, options);
      Result<Received>& r = next.wait();  // lives in `next`
      if (!r.ok()) return;  // the initiator went away: the control channel reports it
      const Value& v = r.value().value;
      if (v.is_none()) return;
      received_ += r.value().wire_bytes;
    }
  });
}

TensorDrain::~TensorDrain() {
  if (thread_.joinable()) thread_.join();
}

std::uint64_t TensorDrain::finish() {
  if (thread_.joinable()) thread_.join();
  return received_.load();
}

}  // namespace wcomm::bench
