// The fan-out fairness benchmark (wcomm): one node sends to several peers at once (each runs
// `wcomm bench sink`) for a while, and the report gives each peer's goodput and Jain's
// fairness index over them. Run it with the egress scheduler on and off (the node's config)
// to see what the scheduler does for fairness and for aggregate goodput.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "netbench/initiator.h"
#include "wcomm/comm.h"

namespace wcomm::bench {

inline constexpr std::uint32_t kFanoutTag = 0xFFFFFF03u;

struct FanoutOptions {
  std::uint64_t message_bytes = 1 << 20;  // random bytes (compression does not shrink them)
  double duration_s = 10.0;
  std::uint64_t in_flight = 2;            // per peer
  Seconds timeout{120.0};
  ProgressSink progress;
};

// (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n when one peer gets everything.
double jain_index(const std::vector<double>& values);

// Sends to every peer in `peers` at once for duration_s (each message acknowledged by the
// sink: goodput counts bytes the peer has read), then sends each the end marker.
nlohmann::json run_fanout(Comm& comm, const std::vector<Peer>& peers, const FanoutOptions& options);

// The receiving side: reads kFanoutTag from `source` until its end marker; returns the bytes.
std::uint64_t run_sink(Comm& comm, const Peer& source, Seconds first_message_timeout, Seconds timeout);

}  // namespace wcomm::bench
