// An experiment sweep's summary.json (`wcomm cluster sweep`, or V0.1's experiment_sweep) as one
// self-contained HTML page: completion time of every cell side by side, and a table.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "netbench/html_report.h"

namespace wcomm::tools {

// True for a sweep summary (seed, completed and remaining).
bool is_sweep_summary(const nlohmann::json& summary);

bench::HtmlReport render_sweep_html(const nlohmann::json& summary, const std::string& source_name);

}  // namespace wcomm::tools
