// The benchmark's latency-under-load phase (initiator side): for each load direction x
// concurrency x fraction, background traffic at fraction x the measured capacity of that
// direction on separate TCP connections (load_client.h), while foreground Comm pings probe
// the RTT at exponentially distributed (randomized) spacing around --load-probe-interval.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "netbench/initiator.h"
#include "netbench/protocol.h"
#include "netbench/settings.h"

namespace wcomm::bench {

// The capacity of `direction` in Mbit/s of payload, all streams together: the highest median
// aggregate goodput over the sizes of report["throughput"][direction]; falls back to the other
// directions' (bidirectional: twice upload's) and 0 when nothing was measured.
double measured_capacity_mbps(const nlohmann::json& throughput, const std::string& direction);

struct LoadPhaseTarget {
  std::string host;    // the responder
  std::uint16_t port;  // its load server (its Comm port + 1)
};

// Runs every scenario and returns the report's latency_under_load list. `probe` does one
// foreground round trip and returns its RTT in ms. `control`: the foreground Comm's control
// channel, which the "tensor" background loads (settings.load_backgrounds).
nlohmann::json run_load_phase(const BenchSettings& settings, const nlohmann::json& throughput,
                              const LoadPhaseTarget& target, const std::function<double()>& probe,
                              const ProgressSink& progress, ControlChannel* control = nullptr);

}  // namespace wcomm::bench
