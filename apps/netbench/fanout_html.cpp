// render_fanout_html: the fan-out report's page (fanout_html.h).
#include "netbench/fanout_html.h"

#include "netbench/html_page.h"
#include "netbench/json_access.h"
#include "netbench/svg_plot.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

std::string value_text(const json& v) { return escape_xml(display_text(v)); }

}  // namespace

bool is_fanout_report(const json& report) {
  return report.is_object() && report.value("scenario", json("")) == "fanout" && report.contains("per_peer") &&
         report["per_peer"].is_array();
}

HtmlReport render_fanout_html(const json& report, const std::string& source_name) {
  HtmlReport page;
  const json& peers = report["per_peer"];
  const double aggregate = number_or_zero(report, "aggregate_goodput_mbps");
  const double fair_share = peers.empty() ? 0.0 : aggregate / static_cast<double>(peers.size());

  Plot plot;
  plot.id = "fanout-goodput";
  plot.title = "Goodput per peer";
  plot.note = "points: each peer's goodput over the run; dashed line: the fair share (aggregate / peers)";
  plot.x.label = "peer";
  plot.y.label = "Mbit/s";
  plot.y.include_zero = true;
  PlotSeries measured{.name = "goodput", .color = palette_color(0), .points = {}};
  measured.radius = 5;
  measured.opacity = 0.9;
  PlotSeries fair{.name = "fair share", .color = palette_color(1), .points = {}};
  fair.draw_points = false;
  fair.draw_line = true;
  fair.dashed = true;
  std::string rows;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const json& p = peers[i];
    const std::string name = display_text(p.value("peer", json("?")));
    const double mbps = number_or_zero(p, "goodput_mbps");
    plot.x.categories.push_back(name);
    measured.points.push_back({.x = static_cast<double>(i), .y = mbps, .label = name + ": " + three_decimals(mbps) + " Mbit/s"});
    fair.points.push_back({.x = static_cast<double>(i), .y = fair_share, .label = "fair share " + three_decimals(fair_share)});
    rows += "<tr><td>" + escape_xml(name) + "</td><td class=\"num\">" + three_decimals(mbps) + "</td><td class=\"num\">" +
            (fair_share > 0 ? three_decimals(mbps / fair_share) : std::string("-")) + "</td><td class=\"num\">" +
            value_text(p.value("bytes", json(nullptr))) + "</td></tr>\n";
  }
  plot.series = {fair, measured};
  page.plots.push_back(plot);

  std::string h = simple_page_start("wcomm bench fanout: " + source_name, "Fan-out fairness: " + source_name);
  h += "<p>One node sends to " + std::to_string(peers.size()) + " peers at once for " +
       value_text(report.value("duration_s", json(nullptr))) + " s. Jain's index " +
       three_decimals(number_or_zero(report, "jain_index")) + " (1: every peer got the same), aggregate " +
       three_decimals(aggregate) + " Mbit/s.</p>\n";
  h += "<figure>\n" + render_svg(plot, false) + "<figcaption>" + escape_xml(plot.note) + "</figcaption>\n</figure>\n";
  h += "<h2>Per peer</h2>\n<table>\n<tr><th>peer</th><th>goodput Mbit/s</th><th>x fair share</th><th>bytes</th></tr>\n" +
       rows + "</table>\n<h2>Settings</h2>\n<table>\n";
  for (const char* key : {"message_bytes", "in_flight_per_peer", "chunk_bytes", "egress_quantum_bytes",
                          "egress_rate_bytes_per_second", "egress_max_bulk_flows"})
    if (report.contains(key)) h += "<tr><th>" + std::string(key) + "</th><td>" + value_text(report[key]) + "</td></tr>\n";
  if (report.contains("stats") && report["stats"].is_object())
    for (const auto& [k, v] : report["stats"].items())
      h += "<tr><th>" + escape_xml(k) + "</th><td>" + value_text(v) + "</td></tr>\n";
  h += "</table>\n" + simple_page_end(source_name);
  page.html = std::move(h);
  return page;
}

}  // namespace wcomm::bench
