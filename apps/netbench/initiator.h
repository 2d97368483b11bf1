// The benchmark initiator: drives a responder through the control protocol (hello, latency
// pings, throughput phases, stop) and builds the V0.1-shaped report.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "netbench/settings.h"
#include "wcomm/comm.h"

namespace wcomm::bench {

// Receives one human-readable progress line (no newline); empty: silent.
using ProgressSink = std::function<void(const std::string& line)>;

struct InitiatorOptions {
  BenchSettings settings;
  std::string interface;  // diagnosed and recorded; "" = the one the route to the responder leaves by
  ProgressSink progress;
  // Recorded as tensor.torch_version (V0.1 wrote its torch.__version__ there); "" = null. The
  // bench makes its tensors itself; python -m wireless_comm.benchmark passes its torch's.
  std::string torch_version;
};

// Runs the whole benchmark against `responder` (a peer of `comm`) and returns the report.
// Throws BenchProtocolError for a peer that breaks the protocol, std::invalid_argument for
// settings that cannot run, and wcomm's typed errors for transport failures and timeouts.
nlohmann::json run_initiator(Comm& comm, const Peer& responder, const InitiatorOptions& options);

}  // namespace wcomm::bench
