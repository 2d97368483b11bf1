// System, network and radio diagnostics of one benchmark node, in the V0.1 report's shapes:
// the environment snapshot (environment_before / environment_after /
// responder_environment_at_handshake) and the counter deltas between two snapshots.
// The pieces live beside it: diagnostics_commands.h (external tools), diagnostics_proc.h
// (/proc and /sys counters), diagnostics_radio.h (iw / ethtool), diagnostics_ping.h (ping),
// link_sampler.h (periodic link_samples).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "diagnostics_commands.h"  // sibling-relative: the tests include apps/netbench headers by path

namespace wcomm::bench {

struct EnvironmentOptions {
  // The interface to describe; "" means the one the route to peer_host leaves by
  // (interface_for_peer), and null sections when that is unknown too.
  std::string interface;
  // The other node's address: `ip route get` and `ss -tinm dst` are about it. "" leaves
  // route and tcp_sockets null.
  std::string peer_host;
  CommandOptions commands;  // timeout and PATH of every tool run
};

// One snapshot with V0.1's keys: captured_at_unix_s, hostname, machine, platform (as Python's
// platform.platform(): Linux-<release>-<machine>-with-glibc<version>), python (null: no Python
// here), cpu_count, cpu_details (lscpu -J), load_average [1, 5, 15 min], memory
// {MemTotal_kib, MemAvailable_kib, SwapTotal_kib, SwapFree_kib}, interface {name, address,
// mtu, operstate, statistics, addresses (ip -j address show dev IF)}, route (ip route get
// PEER), qdisc (tc -s qdisc show dev IF), tcp {congestion_control,
// available_congestion_control, default_qdisc, tcp_mtu_probing, tcp_rmem, tcp_wmem} (the
// /proc/sys strings, null when unreadable), tcp_sockets (ss -tinm dst PEER), clock_sync
// (timedatectl show -p NTPSynchronized -p TimeUSec), power_mode (nvpmodel -q), radio
// (radio_section), kernel_network_counters (read_kernel_network_counters).
// Takes about as long as its ~17 tool runs (tens of ms); call it outside timed phases.
nlohmann::json capture_environment(const EnvironmentOptions& options);

// The interface that the route to `peer_host` leaves by ("dev X" of `ip route get`), or "".
std::string interface_for_peer(const std::string& peer_host, const CommandOptions& options = {});

// `ss -tinm dst PEER` as a command result (the environment's tcp_sockets, and the initiator's
// tcp_socket_before_stop).
nlohmann::json tcp_sockets(const std::string& peer_host, const CommandOptions& options = {});

// after - before for every counter of two same-shaped counter objects: numbers subtract,
// per-CPU arrays subtract element by element (over the CPUs both have), objects recurse over
// the keys both have, strings keep `after`'s value, and anything null on either side is null.
nlohmann::json counter_delta(const nlohmann::json& before, const nlohmann::json& after);

// V0.1's kernel_counter_delta: counter_delta of two kernel_network_counters objects.
nlohmann::json kernel_counter_delta(const nlohmann::json& before_counters, const nlohmann::json& after_counters);

// V0.1's interface_counter_delta: counter_delta of two interface statistics objects.
nlohmann::json interface_counter_delta(const nlohmann::json& before_statistics, const nlohmann::json& after_statistics);

// Fills a node section's environment_before, environment_after, interface_counter_delta and
// kernel_counter_delta from two capture_environment() snapshots (deltas are null when a
// snapshot lacks the counters, e.g. it had no interface).
void add_environment_section(nlohmann::json& node_section, const nlohmann::json& before, const nlohmann::json& after);

}  // namespace wcomm::bench
