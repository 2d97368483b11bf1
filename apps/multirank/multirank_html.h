// A multirank report (`wcomm multirank`, or V0.1's) as one self-contained HTML page: the
// settings, and per collective the completion latency by payload size with each rank's median
// beside it (the per-rank spread).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "netbench/html_report.h"

namespace wcomm::tools {

// True for a multirank report (it has collective_summary and rank_results).
bool is_multirank_report(const nlohmann::json& report);

bench::HtmlReport render_multirank_html(const nlohmann::json& report, const std::string& source_name);

}  // namespace wcomm::tools
