// Kernel counters of the diagnostics, read straight from /proc and /sys (no tools, so the
// periodic sampler stays cheap): interface statistics, context switches, NET_RX / NET_TX
// softirqs, softnet, the interface's IRQs, memory. Each parser takes the file's text, so the
// tests can feed it fixed samples; each reader reads this machine's file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

// /proc/softirqs -> {"NET_RX": {"per_cpu": [..], "total": n}, "NET_TX": {...}}; a row the
// kernel does not have is left out.
nlohmann::json parse_softirqs(std::string_view text);

// /proc/net/softnet_stat (one hex row per CPU) -> {"processed", "dropped", "time_squeeze",
// "cpu_collision", "received_rps", "flow_limit_count"}, each {"per_cpu": [..], "total": n}.
// A column an older kernel does not print counts 0.
nlohmann::json parse_softnet_stat(std::string_view text);

// The "ctxt" line of /proc/stat, or nullopt.
std::optional<unsigned long long> parse_context_switches(std::string_view proc_stat);

// Lines of /proc/interrupts whose device / action names name one of `names` (a name matches
// a token that equals it or holds it between non-alphanumeric characters, so "virtio2"
// matches "virtio2-input.0" but not "virtio20-config"):
//   {"irqs": {"<irq>": {"description": "<chip, type and actions>", "per_cpu": [..], "total": n}},
//    "per_cpu": [sum over those irqs], "total": n}
// or null when no line matches (V0.1 wrote null for loopback, which has no IRQ).
nlohmann::json parse_interface_interrupts(std::string_view text, const std::vector<std::string>& names);

// /proc/meminfo -> {"MemTotal_kib", "MemAvailable_kib", "SwapTotal_kib", "SwapFree_kib"}
// (null for a line that is missing).
nlohmann::json parse_meminfo(std::string_view text);

// The names an interface's IRQ lines carry: the interface itself, its device (the basename of
// /sys/class/net/IF/device, e.g. "virtio2" or "0000:03:00.0") and its driver (e.g.
// "iwlwifi"). Resolved once per run: they do not change while it runs.
std::vector<std::string> interface_irq_names(const std::string& interface);

// Whether this host has a network interface of that name (/sys/class/net/NAME; a name with a
// '/' or "." / ".." is none). V0.1's tools refused an --interface that names none.
bool network_interface_exists(const std::string& name);

// /sys/class/net/IF/statistics: {rx_bytes, rx_dropped, rx_errors, rx_packets, tx_bytes,
// tx_dropped, tx_errors, tx_packets}; a counter that cannot be read is null.
nlohmann::json read_interface_statistics(const std::string& interface);

// V0.1's kernel_network_counters of this machine: {context_switches, interface_irq, softirqs,
// softnet}. `irq_names` as interface_irq_names() returns them (empty: interface_irq null).
nlohmann::json read_kernel_network_counters(const std::vector<std::string>& irq_names);

}  // namespace wcomm::bench
