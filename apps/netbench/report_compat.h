// Reading a report written by V0.1 or by wcomm through one set of names: V0.1's
// latency_under_load scenarios carry other keys than wcomm's (docs/benchmark-report.md), and the
// HTML report reads wcomm's.
#pragma once

#include <nlohmann/json.hpp>

namespace wcomm::bench {

// A copy of `scenario` with each wcomm key it lacks filled from its V0.1 counterpart, when that
// is present: rtt_ms <- probe_summary_ms, samples_ms <- probe_samples_ms, target_fraction <-
// load_fraction, streams <- concurrency_per_direction, capacity_mbps <- capacity_reference_mbps,
// target_mbps <- background_load.target_mbps, delivered_mbps <- background_load.goodput_mbps.
nlohmann::json load_scenario_with_wcomm_keys(const nlohmann::json& scenario);

// A copy of `report` whose latency_under_load scenarios went through load_scenario_with_wcomm_keys.
nlohmann::json report_with_wcomm_keys(const nlohmann::json& report);

}  // namespace wcomm::bench
