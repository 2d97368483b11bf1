// The multirank report's summary (v01-collectives-cluster.md 1.11) and side report (1.10).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wcomm::tools {

// collective_summary from every rank's result (sorted by rank): per collective and size,
// per_rank_ms, completion_samples_ms (max over ranks of each iteration) and
// collective_completion_ms (statistics of those).
nlohmann::json collective_summary(const nlohmann::json& rank_results);

// The side report: local_ranks, environment_before / _after, interface_counter_delta,
// kernel_counter_delta, link_samples.
nlohmann::json side_report(const std::vector<int>& local_ranks, const nlohmann::json& before,
                           const nlohmann::json& after, const nlohmann::json& link_samples);

}  // namespace wcomm::tools
