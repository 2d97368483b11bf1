// A fan-out report (`wcomm bench fanout`, fanout.h) as one self-contained HTML page: each
// peer's goodput as a plot beside the fair share, Jain's index, the aggregate, the settings.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "netbench/html_report.h"

namespace wcomm::bench {

// True for a fan-out report (scenario "fanout" with per_peer).
bool is_fanout_report(const nlohmann::json& report);

HtmlReport render_fanout_html(const nlohmann::json& report, const std::string& source_name);

}  // namespace wcomm::bench
