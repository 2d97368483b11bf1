// V0.1 report keys read through wcomm's names (report_compat.h).
#include "netbench/report_compat.h"

#include <initializer_list>
#include <string_view>

#include "netbench/json_access.h"

namespace wcomm::bench {

nlohmann::json load_scenario_with_wcomm_keys(const nlohmann::json& scenario) {
  nlohmann::json out = scenario;
  if (!out.is_object()) return out;
  auto fill = [&](const char* wcomm_key, std::initializer_list<std::string_view> v01_path) {
    if (out.contains(wcomm_key)) return;
    const nlohmann::json& value = field_path(scenario, v01_path);
    if (!value.is_null()) out[wcomm_key] = value;
  };
  fill("rtt_ms", {"probe_summary_ms"});
  fill("samples_ms", {"probe_samples_ms"});
  fill("target_fraction", {"load_fraction"});
  fill("streams", {"concurrency_per_direction"});
  fill("capacity_mbps", {"capacity_reference_mbps"});
  fill("target_mbps", {"background_load", "target_mbps"});
  fill("delivered_mbps", {"background_load", "goodput_mbps"});
  return out;
}

nlohmann::json report_with_wcomm_keys(const nlohmann::json& report) {
  nlohmann::json out = report;
  if (!out.is_object()) return out;
  const auto it = out.find("latency_under_load");
  if (it == out.end() || !it->is_array()) return out;
  for (auto& scenario : *it) scenario = load_scenario_with_wcomm_keys(scenario);
  return out;
}

}  // namespace wcomm::bench
