// Keeps what a TCP connection holds in the kernel (unsent and in flight) to about what its
// path delivers in its minimum round trip plus a target delay. A bulk stream then no longer
// fills the queue at a slow link's bottleneck (a Wi-Fi access point's, a bloated router's),
// and a message written behind it, or another flow through that queue, waits about the
// target instead of the whole queue (docs/wifi.md, "Bounding the queue"). It is the kernel's
// own measurements (TCP_INFO: minimum and smoothed RTT, bytes acknowledged) turned into the
// send buffer's size (SO_SNDBUF): a delay-based bound in the spirit of LEDBAT, with no rate
// to configure. Where the path is slower than the bound, the acknowledged rate falls and
// the buffer with it; where it is faster, the buffer grows by (min RTT + target) / RTT a look.
//
// Flows through one queue share it evenly: each budget is its rate's share plus the same
// kShareBytes, so a flow above the mean share is given proportionally less room and slows,
// one below it speeds up (send_budget_bytes). Without that constant any split of the queue
// would be kept: each flow's budget would follow its own rate. A connection whose first round
// trips already waited behind its node's other flows counts that queue in its min RTT and
// takes more (docs/wifi.md, "Flows from one node through one queue").
//
// It acts only on a path that queues: until the smoothed RTT passes min RTT + target, the
// kernel's send buffer autotuning is left alone, so loopback, a LAN or any path without a
// standing queue never sees it. It never sets a buffer beyond net.core.wmem_max allows: on a
// path whose bandwidth-delay product is larger, it stays out rather than cost goodput.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace wcomm::transport {

class SendQueueBound {
 public:
  explicit SendQueueBound(std::chrono::microseconds target) : target_(target) {}

  // The writer found socket fd full with more to write (so the flow is not limited by the
  // application): at most every kInterval, sizes the send buffer from TCP_INFO.
  void on_write_blocked(int fd);
  // The send buffer it last set (what the kernel counts against it: payload and overhead);
  // 0 while it has not acted, else at least kMinBytes. Any thread (the writer's chunk size
  // follows it).
  std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  // At most this often: the delivery rate and RTT the kernel reports move per round trip.
  static constexpr std::chrono::milliseconds kInterval{10};
  // Never below: a few full-size segments, so even a very slow link is kept busy.
  static constexpr std::uint64_t kMinBytes = 16u << 10;
  // Added to every flow's budget. Flows through one queue settle at equal rates, with about
  // n x kShareBytes / link rate more queueing delay than the target (in the model: 1.5 ms for
  // 3 flows at 16 MB/s; measured on one uplink of the emulated cell: 1-2 ms at the median),
  // and a split between them shrinks by a factor (min RTT + target) / RTT a look (docs/wifi.md,
  // "Flows from one node through one queue").
  static constexpr std::uint64_t kShareBytes = 8u << 10;

 private:
  std::chrono::microseconds target_;
  std::chrono::steady_clock::time_point last_{};  // the last look (none yet: the epoch)
  std::uint64_t last_acked_ = 0;
  std::atomic<std::uint64_t> bytes_{0};
};

// The send buffer for a flow that delivered rate bytes a second, with window_us of min RTT +
// target: what it delivers in that window, plus kShareBytes; at least kMinBytes.
std::uint64_t send_budget_bytes(std::uint64_t rate, std::uint64_t window_us);

// The largest send buffer SO_SNDBUF can give here (twice net.core.wmem_max), read once.
std::uint64_t max_send_buffer_bytes();

}  // namespace wcomm::transport
