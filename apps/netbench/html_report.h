// The benchmark report as one self-contained HTML page (`wcomm report RUN.json -o RUN.html`):
// tables of the run's settings, both nodes' environment and counters, and the plots of
// report_plots() as inline SVG. Nothing is fetched: no scripts, stylesheets, fonts or images
// from anywhere, so the page opens the same offline and can be mailed as one file.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svg_plot.h"  // sibling-relative: the tests include apps/netbench headers by path

namespace wcomm::bench {

struct HtmlReport {
  std::string html;         // the page (XHTML-compatible HTML5: every element closed, so XML tools parse it)
  std::vector<Plot> plots;  // the plots on the page, in page order (for --svg-dir)
};

// Renders `report` (a wcomm or V0.1 benchmark report; null or missing sections are shown as
// such, never an error). `source_name` is shown in the title and footer (e.g. the JSON's file
// name).
HtmlReport render_html_report(const nlohmann::json& report, const std::string& source_name);

}  // namespace wcomm::bench
