// ICMP ping between the nodes (V0.1's ping_to_responder / ping_to_initiator): loss, RTT and
// jitter that TCP's retransmissions hide from the application-level measurements.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "wcomm/config.h"

#include "diagnostics_commands.h"  // sibling-relative: the tests include apps/netbench headers by path

namespace wcomm::bench {

struct PingOptions {
  std::uint64_t count = 3;   // --ping-count
  double interval_s = 0.2;   // between echo requests; 0.2 s is the shortest a non-root user may ask
  double wait_s = 2.0;       // -W: how long a reply may take before it counts as lost (V0.1: 2)
  std::string interface;     // -I: leave by this interface ("" = as routed)
  CommandOptions command;    // its timeout is raised to cover count x interval + wait
};

// The summary lines of iputils (or busybox) ping output ->
// {transmitted, received, loss_percent, min_ms, avg_ms, max_ms, jitter_ms}; jitter_ms is the
// mdev of the rtt line. Values ping did not print (all replies lost, no rtt line) are null.
nlohmann::json parse_ping_output(std::string_view text);

// Runs `ping -n -c COUNT -i INTERVAL -W WAIT [-I IF] HOST` and returns V0.1's shape: the parsed
// fields plus "command" (the command result). A missing ping or an unreachable host gives
// null figures beside the command result, never an exception.
nlohmann::json run_ping(const std::string& host, const PingOptions& options = {});

// run_ping's shape with null figures and the reason, for a peer reached only through Unix
// sockets (no network path to ping).
nlohmann::json no_network_ping(const Peer& peer);

}  // namespace wcomm::bench
