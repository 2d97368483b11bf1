// The benchmark responder: answers one initiator's control requests (docs/wire-format.md)
// until `stop`, then hands its own report back in `stopped`.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "netbench/initiator.h"
#include "wcomm/comm.h"

namespace wcomm::bench {

struct ResponderOptions {
  // How long to wait for the initiator's first request (nullopt: as long as it takes).
  std::optional<Seconds> first_request_timeout;
  // Bounds every later wait for a request, each reply and each bulk phase.
  Seconds operation_timeout{120.0};
  std::string interface;  // diagnosed and recorded; "" = the one the route to the initiator leaves by
  double sample_interval = 1.0;  // link sampling period, s
  ProgressSink progress;
};

// Serves `initiator` (a peer of `comm`) until it sends `stop`; returns the report it sent back
// in `stopped` (the initiator's report keeps it under "responder"). The caller closes the Comm.
// Unknown or malformed requests are answered with {op: "error", message} and the session goes
// on; transport failures and timeouts throw wcomm's typed errors.
nlohmann::json run_responder(Comm& comm, const Peer& initiator, const ResponderOptions& options);

}  // namespace wcomm::bench
