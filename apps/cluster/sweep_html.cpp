// render_sweep_html: one box per cell (its completion statistics) and a table of the cells.
#include "cluster/sweep_html.h"

#include "netbench/json_access.h"

namespace wcomm::tools {
namespace {

using nlohmann::json;
using bench::escape_xml;

std::string text(const json& v) { return escape_xml(bench::display_text(v)); }

}  // namespace

bool is_sweep_summary(const json& s) {
  return s.is_object() && s.contains("seed") && s.contains("completed") && s.contains("remaining");
}

bench::HtmlReport render_sweep_html(const json& summary, const std::string& source_name) {
  bench::HtmlReport page;
  const json completed = summary.value("completed", json::array());
  std::string h = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><title>sweep: " + escape_xml(source_name) +
                  "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
                  "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th{background:#eee}</style></head><body>\n";
  h += "<h1>experiment sweep: " + escape_xml(source_name) + "</h1>\n<p>seed " + text(summary.value("seed", json(0))) +
       ", rounds " + text(summary.value("rounds", json(0))) + ", warm-up rounds " +
       text(summary.value("warmup_rounds", json(0))) + ", " + std::to_string(completed.size()) + " cells done, " +
       std::to_string(summary.value("remaining", json::array()).size()) + " remaining (in run order)</p>\n";
  bench::Plot plot;
  plot.id = "sweep-completion";
  plot.title = "completion time by cell (run order)";
  plot.note = "boxes: completion per iteration (slowest rank), min / p25 / p50 / p75 / max";
  plot.x.label = "cell";
  plot.y.label = "ms";
  plot.y.log_scale = true;
  plot.width = std::max(760, 60 * static_cast<int>(completed.size()));
  h += "<table><tr><th>#</th><th>cell</th><th>suite</th><th>collective</th><th>bytes</th><th>ring</th><th>settings</th>"
       "<th>p50 ms</th><th>p95 ms</th><th>max ms</th><th>Jain p50</th><th>report</th></tr>";
  for (std::size_t i = 0; i < completed.size(); ++i) {
    const json& c = completed[i];
    const json stats = c.value("completion_ms", json(nullptr));
    const std::string name = c.value("name", std::string("?"));
    plot.x.categories.push_back(name);
    if (stats.is_object())
      plot.boxes.push_back({.x = static_cast<double>(i), .half_width = 0.3, .low = bench::number_or_zero(stats, "min"), .q1 = bench::number_or_zero(stats, "p25"),
                            .median = bench::number_or_zero(stats, "p50"), .q3 = bench::number_or_zero(stats, "p75"), .high = bench::number_or_zero(stats, "max"),
                            .series = c.value("suite", std::string("cell")),
                            .color = bench::palette_color(static_cast<std::size_t>(i % 8)), .label = name});
    json settings = c.value("settings", json::object());
    if (c.contains("comm")) settings["comm"] = c["comm"];
    const json jain = c.value("jain_fairness", json(nullptr));
    h += "<tr><td>" + std::to_string(i + 1) + "</td><td>" + escape_xml(name) + "</td><td>" + text(c.value("suite", json(""))) +
         "</td><td>" + text(c.value("collective", json(""))) + "</td><td>" + text(c.value("payload_bytes", json(0))) +
         "</td><td>" + text(c.value("ring", json::array())) + "</td><td>" + text(settings) + "</td><td>" +
         bench::three_decimals(bench::number_or_zero(stats, "p50")) + "</td><td>" + bench::three_decimals(bench::number_or_zero(stats, "p95")) + "</td><td>" + bench::three_decimals(bench::number_or_zero(stats, "max")) + "</td><td>" +
         (jain.is_object() ? bench::three_decimals(bench::number_or_zero(jain, "p50")) : std::string("-")) + "</td><td>" + text(c.value("report", json(""))) +
         "</td></tr>";
  }
  h += "</table>\n<div>" + bench::render_svg(plot, false) + "<p>" + escape_xml(plot.note) + "</p></div>\n";
  page.plots.push_back(std::move(plot));
  h += "<p>from " + escape_xml(source_name) + "</p></body></html>\n";
  page.html = std::move(h);
  return page;
}

}  // namespace wcomm::tools
