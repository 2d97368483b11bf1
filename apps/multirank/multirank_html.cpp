// render_multirank_html: tables and SVG plots of a multirank report's collective_summary.
#include "multirank/multirank_html.h"

#include <algorithm>

#include "netbench/json_access.h"

namespace wcomm::tools {
namespace {

using nlohmann::json;
using bench::escape_xml;

std::string cell(const json& v) { return escape_xml(bench::display_text(v)); }

}  // namespace

bool is_multirank_report(const json& report) {
  return report.is_object() && report.contains("collective_summary") && report.contains("rank_results");
}

bench::HtmlReport render_multirank_html(const json& report, const std::string& source_name) {
  bench::HtmlReport page;
  std::string h = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><title>multirank: " + escape_xml(source_name) +
                  "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
                  "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th{background:#eee}</style></head><body>\n";
  h += "<h1>multirank: " + escape_xml(source_name) + "</h1>\n<p>mode " + cell(report.value("mode", json("?"))) +
       ", world size " + cell(report.value("world_size", json(0))) + ", " + cell(report.value("started_at", json(""))) +
       " to " + cell(report.value("finished_at", json(""))) + "</p>\n";
  h += "<h2>Settings</h2>\n<table>";
  const json settings = report.value("settings", json::object());
  for (auto& [k, v] : settings.items())
    h += "<tr><th>" + escape_xml(k) + "</th><td>" + cell(v) + "</td></tr>";
  h += "</table>\n<h2>Completion by collective and size</h2>\n<table><tr><th>collective</th><th>bytes</th>"
       "<th>p50 ms</th><th>p95 ms</th><th>max ms</th><th>per-rank p50 min ms</th><th>per-rank p50 max ms</th>"
       "<th>spread (max/min)</th></tr>";
  const json& summary = report["collective_summary"];
  for (auto& [collective, sizes] : summary.items()) {
    std::vector<std::pair<long long, std::string>> ordered;
    for (auto& [size, entry] : sizes.items()) ordered.emplace_back(std::stoll(size), size);
    std::sort(ordered.begin(), ordered.end());
    bench::Plot plot;
    plot.id = "latency-" + collective;
    plot.title = collective + ": completion time by payload size";
    plot.note = "boxes: completion per iteration (slowest rank), min / p25 / p50 / p75 / max; points: each rank's p50";
    plot.x.label = "payload bytes";
    plot.y.label = "ms";
    plot.y.log_scale = true;
    std::vector<bench::PlotSeries> ranks;
    for (std::size_t i = 0; i < ordered.size(); ++i) {
      const json& entry = sizes[ordered[i].second];
      plot.x.categories.push_back(ordered[i].second);
      const json& c = entry["collective_completion_ms"];
      plot.boxes.push_back({.x = static_cast<double>(i), .half_width = 0.25, .low = bench::number_or_zero(c, "min"), .q1 = bench::number_or_zero(c, "p25"),
                            .median = bench::number_or_zero(c, "p50"), .q3 = bench::number_or_zero(c, "p75"), .high = bench::number_or_zero(c, "max"), .series = "completion",
                            .color = bench::palette_color(0), .label = collective + " " + ordered[i].second + " B"});
      double lo = 1e300, hi = 0;
      std::size_t k = 0;
      for (auto& [rank, stats] : entry["per_rank_ms"].items()) {
        if (ranks.size() <= k) ranks.push_back({.name = "rank " + rank, .color = bench::palette_color(k + 1), .points = {}});
        double p50 = bench::number_or_zero(stats, "p50");
        ranks[k].points.push_back({.x = static_cast<double>(i) + 0.3, .y = p50, .label = "rank " + rank + " p50 " + bench::three_decimals(p50) + " ms"});
        lo = std::min(lo, p50);
        hi = std::max(hi, p50);
        ++k;
      }
      h += "<tr><td>" + escape_xml(collective) + "</td><td>" + ordered[i].second + "</td><td>" + bench::three_decimals(bench::number_or_zero(c, "p50")) +
           "</td><td>" + bench::three_decimals(bench::number_or_zero(c, "p95")) + "</td><td>" + bench::three_decimals(bench::number_or_zero(c, "max")) + "</td><td>" + bench::three_decimals(lo) + "</td><td>" +
           bench::three_decimals(hi) + "</td><td>" + (lo > 0 ? bench::three_decimals(hi / lo) : std::string("-")) + "</td></tr>";
    }
    plot.series = std::move(ranks);
    page.plots.push_back(std::move(plot));
  }
  h += "</table>\n";
  for (const auto& plot : page.plots) h += "<div>" + bench::render_svg(plot, false) + "<p>" + escape_xml(plot.note) + "</p></div>\n";
  h += "<p>from " + escape_xml(source_name) + "</p></body></html>\n";
  page.html = std::move(h);
  return page;
}

}  // namespace wcomm::tools
