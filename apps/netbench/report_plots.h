// The plots of a benchmark report (RTT by size, goodput by size and direction, latency under
// load, link-sample time series), built from the report JSON for `wcomm report`.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "svg_plot.h"  // sibling-relative: the tests include apps/netbench headers by path

namespace wcomm::bench {

// Every plot of the report, in page order, each holding the run's own data points:
//  rtt-by-size              one point per latency[].samples_ms sample (series "payload <size>"),
//                           a box (p05 / p25 / p50 / p75 / p95) per size
//  goodput-by-size          one point per throughput.<direction>[].trials[] aggregate_goodput_mbps
//                           (series = direction), a marker at each entry's p50
//  load-rtt-vs-delivered    per latency_under_load[] scenario, a point at (delivered_mbps,
//                           rtt_ms.p50) in series "<direction> p50" and one at rtt_ms.p99 in
//                           "<direction> p99"
//  load-rtt-samples         one point per scenario samples_ms sample (series = direction), a
//                           box per scenario
//  <node>-interface-rate    rx / tx Mbps between consecutive link_samples (n - 1 points each)
//  <node>-softirq-rate      NET_RX / NET_TX softirqs per second, likewise
//  <node>-signal            signal dBm of each link sample that has one (only when some have)
//  <node>-phy-bitrate       rx / tx PHY bitrate of each sample that has one (likewise)
// for node = initiator and responder. Missing or null sections give a plot with no marks.
std::vector<Plot> report_plots(const nlohmann::json& report);

// "0 B", "64 B", "1 KiB", "1.5 MiB": a payload size for labels.
std::string format_bytes(double bytes);

}  // namespace wcomm::bench
