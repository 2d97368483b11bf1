// render_flows_html: the flows report's page (flows_html.h).
#include "netbench/flows_html.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

#include "netbench/html_page.h"
#include "netbench/json_access.h"
#include "netbench/svg_plot.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

// The emulator's mean lag over a run, when the run recorded it.
std::optional<double> lag_ms(const json& run) { return number_of(field_path(run, {"lag", "mean_ms"})); }

bool valid(const json& run) { return lag_ms(run).value_or(0.0) <= kFlowsMaxLagMs; }

// The patterns in the order the runs first name them.
std::vector<std::string> patterns_of(const json& runs) {
  std::vector<std::string> out;
  for (const json& run : runs) {
    const std::string p = string_of(field(run, "pattern"), "?");
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

std::string plot_id(const std::string& pattern) {
  std::string id = "flows-";
  for (char c : pattern) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return id;
}

std::string joined_flows(const std::vector<double>& flows) {
  std::string text;
  for (double x : flows) text += (text.empty() ? "" : " / ") + three_decimals(x);
  return text.empty() ? "-" : text;
}

// One pattern: each valid run's flows as points over its design, and its fair share (sum / flows).
Plot pattern_plot(const std::string& pattern, const std::vector<const json*>& runs) {
  Plot plot;
  plot.id = plot_id(pattern);
  plot.title = "Goodput per flow: " + pattern;
  plot.note = "points: each flow's goodput, one colour per station; tick: the fair share (sum / flows); "
              "runs where the emulator fell behind real time are left out";
  plot.x.label = "design";
  plot.y.label = "Mbit/s";
  plot.y.include_zero = true;
  for (const json* run : runs) {
    if (!valid(*run)) continue;
    const double x = static_cast<double>(plot.x.categories.size());
    const std::string design = string_of(field(*run, "design"), "?");
    plot.x.categories.push_back(design);
    const std::vector<double> flows = numbers_of(field(*run, "flow_mbps"));
    for (std::size_t i = 0; i < flows.size(); ++i) {
      if (plot.series.size() <= i) {
        plot.series.push_back({.name = "station " + std::to_string(i + 1), .color = palette_color(i), .points = {}});
        plot.series.back().radius = 5;
        plot.series.back().opacity = 0.9;
      }
      plot.series[i].points.push_back(
          {.x = x, .y = flows[i], .label = design + ", station " + std::to_string(i + 1) + ": " + three_decimals(flows[i]) + " Mbit/s"});
    }
    if (!flows.empty()) {
      const double share = number_or_zero(*run, "sum_mbps") / static_cast<double>(flows.size());
      plot.markers.push_back({.x0 = x - 0.3, .x1 = x + 0.3, .y = share, .series = "fair share", .color = "#555",
                              .label = design + ": fair share " + three_decimals(share) + " Mbit/s"});
    }
  }
  return plot;
}

std::string pattern_table(const std::vector<const json*>& runs) {
  std::optional<double> iperf3_sum;
  for (const json* run : runs)
    if (string_of(field(*run, "design")) == "iperf3" && valid(*run)) iperf3_sum = number_of(field(*run, "sum_mbps"));
  std::string t = "<table>\n<tr><th>design</th><th>per flow, Mbit/s</th><th>sum</th><th>Jain</th><th>sum x iperf3</th>"
                  "<th>emulator lag, mean ms</th><th>valid</th></tr>\n";
  for (const json* run : runs) {
    const double sum = number_or_zero(*run, "sum_mbps");
    const std::optional<double> lag = lag_ms(*run);
    t += "<tr><td>" + escape_xml(string_of(field(*run, "design"), "?")) + "</td><td class=\"num\">" +
         joined_flows(numbers_of(field(*run, "flow_mbps"))) + "</td><td class=\"num\">" + three_decimals(sum) +
         "</td><td class=\"num\">" + three_decimals(number_or_zero(*run, "jain")) + "</td><td class=\"num\">" +
         (iperf3_sum && *iperf3_sum > 0 ? three_decimals(sum / *iperf3_sum) : std::string("-")) +
         "</td><td class=\"num\">" + (lag ? three_decimals(*lag) : std::string("-")) + "</td><td>" +
         (valid(*run) ? "yes" : "no: the emulator fell behind real time") + "</td></tr>\n";
  }
  return t + "</table>\n";
}

}  // namespace

bool is_flows_report(const json& report) {
  return report.is_object() && report.value("scenario", json("")) == "flows" && report.contains("runs") &&
         report["runs"].is_array();
}

HtmlReport render_flows_html(const json& report, const std::string& source_name) {
  HtmlReport page;
  const json& runs = report["runs"];
  std::string h = simple_page_start("wcomm flows: " + source_name, "Flows sharing the cell: " + source_name);
  h += "<p>" + escape_xml(display_text(field(report, "stations"))) + " stations, every flow of a run at once for " +
       escape_xml(display_text(field(report, "duration_s"))) + " s; cell: " +
       escape_xml(string_of(field(report, "cell"), "not recorded")) +
       ". Jain's index (sum x)<sup>2</sup> / (n sum x<sup>2</sup>) is 1 when every flow got the same. A run counts "
       "only while the emulator's mean lag stays at most " + three_decimals(kFlowsMaxLagMs) + " ms.</p>\n";
  const std::vector<std::string> patterns = patterns_of(runs);
  if (patterns.empty()) h += "<p>no runs in this report</p>\n";
  for (const std::string& pattern : patterns) {
    std::vector<const json*> of_pattern;
    for (const json& run : runs)
      if (string_of(field(run, "pattern"), "?") == pattern) of_pattern.push_back(&run);
    Plot plot = pattern_plot(pattern, of_pattern);
    h += "<h2>" + escape_xml(pattern) + "</h2>\n<figure>\n" + render_svg(plot, false) + "<figcaption>" +
         escape_xml(plot.note) + "</figcaption>\n</figure>\n" + pattern_table(of_pattern);
    page.plots.push_back(std::move(plot));
  }
  page.html = std::move(h) + simple_page_end(source_name);
  return page;
}

}  // namespace wcomm::bench
