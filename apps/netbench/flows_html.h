// A flows report (apps/wifi_cell/fairness-study.sh: flows sharing the emulated cell at once)
// as one self-contained HTML page: per pattern, each flow's goodput per design beside the fair
// share, Jain's index, the sum against iperf3's, and whether the emulator kept real time.
//
// The report: {"scenario": "flows", "stations": N, "duration_s": D, "cell": "...",
//   "runs": [{"pattern": "upload", "design": "iperf3", "flow_mbps": [x1, ...], "sum_mbps": S,
//             "jain": J, "lag": {"windows": W, "mean_ms": M, "worst_window_ms": X, ...}}, ...]}
// where flow_mbps[i] is station i + 1's flow (its upload, or the host's flow to it).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "netbench/html_report.h"

namespace wcomm::bench {

// A run is valid while the emulator's mean lag over it stays at most this (docs/wifi.md).
inline constexpr double kFlowsMaxLagMs = 1.0;

// True for a flows report (scenario "flows" with runs).
bool is_flows_report(const nlohmann::json& report);

HtmlReport render_flows_html(const nlohmann::json& report, const std::string& source_name);

}  // namespace wcomm::bench
