// Unit tests of the HTML report and its SVG plots: rendered from the V0.1 reference report (and
// from it with latency-under-load scenarios and radio samples added), the page must be well
// formed, fetch nothing from the network, and every plot must hold the run's data points.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

// The bench layer's headers live under src/ (not a public include directory).
#include "netbench/diagnostics_commands.h"
#include "netbench/fanout_html.h"
#include "netbench/flows_html.h"
#include "netbench/html_report.h"
#include "netbench/report_compat.h"
#include "netbench/report_plots.h"
#include "netbench/svg_plot.h"
#include "reference_report.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;
using testing::keys_of;
using testing::reference_report;
namespace fs = std::filesystem;

// The reference report with what its run did not have: latency-under-load scenarios (the keys
// docs/benchmark-report.md names) and iw link fields in the initiator's link samples.
json enriched_report() {
  json report = reference_report();
  json scenarios = json::array();
  int k = 0;
  for (const std::string direction : {"upload", "download", "bidirectional"}) {
    for (const int streams : {1, 4}) {
      for (const double fraction : {0.25, 0.5, 0.9}) {
        json samples = json::array();
        for (int i = 0; i < 10 + k; ++i) samples.push_back(2.0 + fraction * 10.0 + 0.1 * ((i * 7 + k) % 13));
        scenarios.push_back({{"direction", direction},
                             {"streams", streams},
                             {"target_fraction", fraction},
                             {"target_mbps", 95.0 * fraction},
                             {"delivered_mbps", 93.0 * fraction},
                             {"duration_s", 10.0},
                             {"rtt_ms", {{"p50", 2.0 + fraction * 10.0}, {"p99", 3.2 + fraction * 10.0}}},
                             {"samples_ms", samples}});
        ++k;
      }
    }
  }
  report["latency_under_load"] = scenarios;
  int i = 0;
  for (auto& sample : report["initiator"]["link_samples"]) {
    sample["link_fields"] = {{"SSID", "lab-5g"},
                             {"signal", std::to_string(-50 - i) + " dBm"},
                             {"signal_dbm", -50 - i},
                             {"rx bitrate", "866.7 MBit/s VHT-MCS 9 80MHz short GI VHT-NSS 2"},
                             {"rx_bitrate_mbps", 866.7},
                             {"tx_bitrate_mbps", 780.0 - 10 * i}};
    ++i;
  }
  return report;
}

// A small well-formedness checker: every element opened is closed, in order (HTML void
// elements and self-closed "/>" elements excepted), quotes of attribute values balance, and
// nothing follows the root. Returns "" when well formed, else what is wrong and where.
std::string well_formedness_error(const std::string& text) {
  static const std::set<std::string> kVoid{"area", "base", "br", "col", "embed", "hr", "img", "input",
                                           "link", "meta", "source", "track", "wbr"};
  std::vector<std::string> open;
  bool root_closed = false;
  std::size_t at = 0;
  while ((at = text.find('<', at)) != std::string::npos) {
    if (text.compare(at, 4, "<!--") == 0) {
      const std::size_t end = text.find("-->", at);
      if (end == std::string::npos) return "unterminated comment at " + std::to_string(at);
      at = end + 3;
      continue;
    }
    if (text.compare(at, 2, "<!") == 0 || text.compare(at, 2, "<?") == 0) {
      at = text.find('>', at);
      if (at == std::string::npos) return "unterminated declaration";
      continue;
    }
    // Find the tag's end outside quoted attribute values.
    std::size_t end = at + 1;
    char quote = 0;
    for (; end < text.size(); ++end) {
      const char c = text[end];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '<') {
        return "'<' inside a tag at " + std::to_string(at);
      } else if (c == '>') {
        break;
      }
    }
    if (end >= text.size()) return "unterminated tag at " + std::to_string(at);
    const std::string tag = text.substr(at + 1, end - at - 1);
    at = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty()) return "</" + name + "> closes nothing";
      if (open.back() != name) return "</" + name + "> closes <" + open.back() + ">";
      open.pop_back();
      if (open.empty()) root_closed = true;
      continue;
    }
    if (root_closed) return "content after the root element: <" + tag.substr(0, 20) + ">";
    const std::size_t name_end = tag.find_first_of(" \t\n/");
    const std::string name = tag.substr(0, name_end);
    if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) return "bad tag name <" + tag.substr(0, 20) + ">";
    if (tag.back() == '/' || kVoid.count(name) != 0) continue;
    open.push_back(name);
    if (name == "style" || name == "script") {  // raw text until its end tag
      const std::size_t close = text.find("</" + name + ">", at);
      if (close == std::string::npos) return "unterminated <" + name + ">";
      at = close;
    }
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  return "";
}

// The <svg> element of plot `id` in the page.
std::string plot_svg(const std::string& html, const std::string& id) {
  const std::size_t start = html.find("<svg id=\"plot-" + id + "\"");
  if (start == std::string::npos) return "";
  const std::size_t end = html.find("</svg>", start);
  return html.substr(start, end == std::string::npos ? std::string::npos : end + 6 - start);
}

// The data-value of every point of `series` in `svg`, in document order.
std::vector<std::string> point_values(const std::string& svg, const std::string& series) {
  std::vector<std::string> values;
  const std::string prefix = "<circle class=\"point\" data-series=\"" + escape_xml(series) + "\" data-value=\"";
  for (std::size_t at = svg.find(prefix); at != std::string::npos; at = svg.find(prefix, at + 1)) {
    const std::size_t begin = at + prefix.size();
    values.push_back(svg.substr(begin, svg.find('"', begin) - begin));
  }
  return values;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<std::string> exact_numbers(const json& values) {
  std::vector<std::string> out;
  for (const auto& v : values) out.push_back(exact_number(v.get<double>()));
  return out;
}

// ---------------------------------------------------------------------------------------------

TEST(SvgPlot, NumbersAndEscaping) {
  EXPECT_EQ(exact_number(0.436559), "0.436559");
  EXPECT_EQ(exact_number(6584.1581453048775), "6584.1581453048775");
  EXPECT_EQ(exact_number(3), "3");
  EXPECT_EQ(readable_number(6584.158), "6584");
  EXPECT_EQ(readable_number(123456.7), "123457");
  EXPECT_EQ(readable_number(0.34759), "0.3476");
  EXPECT_EQ(readable_number(0), "0");
  EXPECT_EQ(escape_xml("a<b & \"c\" 'd'>\x01"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt; ");
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(64), "64 B");
  EXPECT_EQ(format_bytes(1024), "1 KiB");
  EXPECT_EQ(format_bytes(1536 * 1024), "1.5 MiB");
}

TEST(SvgPlot, DrawsEveryPointAndIsWellFormed) {
  Plot plot;
  plot.id = "test";
  plot.title = "A <test> & plot";
  plot.x.label = "x";
  plot.y.label = "y";
  plot.y.log_scale = true;
  PlotSeries series;
  series.name = "s\"1";
  series.color = palette_color(0);
  series.draw_line = true;
  for (int i = 0; i < 50; ++i) series.points.push_back({static_cast<double>(i), 0.1 + i * i, "p" + std::to_string(i)});
  plot.series.push_back(series);
  plot.boxes.push_back({10.0, 2.0, 1.0, 2.0, 3.0, 4.0, 5.0, "box", palette_color(1), "a box"});
  plot.markers.push_back({1.0, 3.0, 7.0, "marker", palette_color(2), "a marker"});
  for (const bool standalone : {false, true}) {
    const std::string svg = render_svg(plot, standalone);
    EXPECT_EQ(well_formedness_error(svg), "") << svg.substr(0, 400);
    EXPECT_EQ(point_values(svg, "s\"1").size(), 50u);
    EXPECT_EQ(count_of(svg, "class=\"box\""), 1u);
    EXPECT_EQ(count_of(svg, "class=\"marker\""), 1u);
    EXPECT_EQ(count_of(svg, "(log scale)"), 1u);
    EXPECT_EQ(svg.find("<test>"), std::string::npos);
    EXPECT_EQ(svg.starts_with("<?xml"), standalone);
    EXPECT_EQ(svg.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos, standalone);
  }
  Plot empty;
  empty.id = "empty";
  empty.empty_message = "nothing here";
  const std::string svg = render_svg(empty, false);
  EXPECT_EQ(well_formedness_error(svg), "");
  EXPECT_NE(svg.find("nothing here"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<circle"), 0u);
}

TEST(SvgPlot, CheckerCatchesMalformedMarkup) {
  EXPECT_EQ(well_formedness_error("<html><body><p>x</p><br></body></html>"), "");
  EXPECT_NE(well_formedness_error("<html><body><p>x</body></html>"), "");
  EXPECT_NE(well_formedness_error("<html><b><i>x</b></i></html>"), "");
  EXPECT_NE(well_formedness_error("<html><a title=\"x>y</html>"), "");
  EXPECT_NE(well_formedness_error("<html></html><p></p>"), "");
}

TEST(HtmlReport, ReferenceReportIsWellFormedAndSelfContained) {
  const HtmlReport page = render_html_report(reference_report(), "v0.1-initiator-loopback.json");
  const std::string& html = page.html;
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_EQ(well_formedness_error(html), "");
  // Nothing fetched: no scripts, stylesheets, frames, images or fonts, no URL anywhere.
  for (const char* banned : {"<script", "<link", "<iframe", "<img", "<object", "<embed", "@import", "url(", "http://",
                             "https://", "src=", "href="}) {
    EXPECT_EQ(html.find(banned), std::string::npos) << banned;
  }
  const std::regex network_reference(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase);
  EXPECT_FALSE(std::regex_search(html, network_reference));
  // Each plot of the page is inline, and each once.
  EXPECT_GE(page.plots.size(), 8u);
  for (const auto& plot : page.plots) EXPECT_EQ(count_of(html, "<svg id=\"plot-" + plot.id + "\""), 1u) << plot.id;
  // The header tables: settings and both nodes' environment.
  for (const char* text : {"throughput_target_bytes", "16777216", "Linux-6.18.44-fc-v857-x86_64-with-glibc2.36",
                           "127.0.0.1/8", "bbr", "iw is not installed", "node-a", "node-b"}) {
    EXPECT_NE(html.find(text), std::string::npos) << text;
  }
}

TEST(HtmlReport, RttPlotHoldsEverySample) {
  const json& report = reference_report();
  const std::string html = render_html_report(report, "run.json").html;
  const std::string svg = plot_svg(html, "rtt-by-size");
  ASSERT_FALSE(svg.empty());
  std::size_t total = 0;
  for (const auto& entry : report["latency"]) {
    const std::string series = "payload " + format_bytes(entry["payload_bytes"].get<double>());
    const std::vector<std::string> values = point_values(svg, series);
    EXPECT_EQ(values.size(), entry["samples_ms"].size()) << series;
    EXPECT_EQ(values, exact_numbers(entry["samples_ms"])) << series;  // the samples themselves, in order
    total += values.size();
  }
  EXPECT_EQ(total, 600u);
  EXPECT_EQ(count_of(svg, "<circle class=\"point\""), total);
  EXPECT_EQ(count_of(svg, "class=\"box\""), report["latency"].size());
}

TEST(HtmlReport, GoodputPlotHoldsEveryTrial) {
  const json& report = reference_report();
  const std::string svg = plot_svg(render_html_report(report, "run.json").html, "goodput-by-size");
  ASSERT_FALSE(svg.empty());
  std::size_t markers = 0;
  for (const char* direction : {"upload", "download", "bidirectional"}) {
    std::vector<std::string> expected;
    for (const auto& entry : report["throughput"][direction]) {
      for (const auto& trial : entry["trials"]) expected.push_back(exact_number(trial["aggregate_goodput_mbps"].get<double>()));
      ++markers;
    }
    EXPECT_EQ(point_values(svg, direction), expected) << direction;
    EXPECT_EQ(expected.size(), 6u) << direction;  // 2 sizes x 3 trials
  }
  EXPECT_EQ(count_of(svg, "class=\"marker\""), markers);
  // The marker of the first upload entry is its p50.
  const std::string p50 = exact_number(report["throughput"]["upload"][0]["aggregate_goodput_mbps"]["p50"].get<double>());
  EXPECT_NE(svg.find("class=\"marker\" data-series=\"upload\" data-value=\"" + p50 + "\""), std::string::npos);
}

TEST(HtmlReport, LinkSamplePlotsHoldEveryInterval) {
  const json report = enriched_report();
  const std::string html = render_html_report(report, "run.json").html;
  EXPECT_EQ(well_formedness_error(html), "");
  for (const char* node : {"initiator", "responder"}) {
    const json& samples = report[node]["link_samples"];
    ASSERT_GE(samples.size(), 2u) << node;
    const std::size_t intervals = samples.size() - 1;
    const std::string rate = plot_svg(html, std::string(node) + "-interface-rate");
    EXPECT_EQ(point_values(rate, "rx Mbit/s").size(), intervals) << node;
    EXPECT_EQ(point_values(rate, "tx Mbit/s").size(), intervals) << node;
    const std::string softirq = plot_svg(html, std::string(node) + "-softirq-rate");
    EXPECT_EQ(point_values(softirq, "NET_RX/s").size(), intervals) << node;
    EXPECT_EQ(point_values(softirq, "NET_TX/s").size(), intervals) << node;
  }
  // The first interval's rx rate, recomputed from the counters.
  const json& s = report["initiator"]["link_samples"];
  const double rx_mbps = (s[1]["interface_statistics"]["rx_bytes"].get<double>() -
                          s[0]["interface_statistics"]["rx_bytes"].get<double>()) *
                         8e-6 /
                         (s[1]["captured_at_unix_s"].get<double>() - s[0]["captured_at_unix_s"].get<double>());
  EXPECT_EQ(point_values(plot_svg(html, "initiator-interface-rate"), "rx Mbit/s")[0], exact_number(rx_mbps));
  // Signal and PHY bitrate plots exist only where samples carry them: here the initiator's.
  EXPECT_EQ(point_values(plot_svg(html, "initiator-signal"), "signal dBm"), (std::vector<std::string>{"-50", "-51", "-52"}));
  EXPECT_EQ(point_values(plot_svg(html, "initiator-phy-bitrate"), "tx bitrate").size(), s.size());
  EXPECT_EQ(point_values(plot_svg(html, "initiator-phy-bitrate"), "rx bitrate").size(), s.size());
  EXPECT_TRUE(plot_svg(html, "responder-signal").empty());
  EXPECT_TRUE(plot_svg(render_html_report(reference_report(), "run.json").html, "initiator-signal").empty());
}

TEST(HtmlReport, LoadPlotsHoldEveryScenarioAndProbe) {
  const json report = enriched_report();
  const std::string html = render_html_report(report, "run.json").html;
  const std::string summary = plot_svg(html, "load-rtt-vs-delivered");
  const std::string samples = plot_svg(html, "load-rtt-samples");
  ASSERT_FALSE(summary.empty());
  ASSERT_FALSE(samples.empty());
  std::map<std::string, std::vector<std::string>> p50s, p99s, probes;
  for (const auto& scenario : report["latency_under_load"]) {
    const std::string direction = scenario["direction"];
    p50s[direction].push_back(exact_number(scenario["rtt_ms"]["p50"].get<double>()));
    p99s[direction].push_back(exact_number(scenario["rtt_ms"]["p99"].get<double>()));
    for (const auto& v : exact_numbers(scenario["samples_ms"])) probes[direction].push_back(v);
  }
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  for (const auto& [direction, expected] : p50s) {
    EXPECT_EQ(sorted(point_values(summary, direction + " p50")), sorted(expected)) << direction;
    EXPECT_EQ(sorted(point_values(summary, direction + " p99")), sorted(p99s[direction])) << direction;
    EXPECT_EQ(point_values(samples, direction), probes[direction]) << direction;
  }
  EXPECT_EQ(count_of(summary, "<circle class=\"point\""), 2 * report["latency_under_load"].size());
  EXPECT_EQ(count_of(samples, "class=\"box\""), report["latency_under_load"].size());
  // The reference run had no scenarios: the plots say so instead of drawing nothing.
  const std::string none = plot_svg(render_html_report(reference_report(), "run.json").html, "load-rtt-vs-delivered");
  EXPECT_NE(none.find("no latency-under-load scenarios in this run"), std::string::npos);
}

// A report V0.1 wrote with four load scenarios (tests/data/README.md): its scenarios carry
// V0.1's keys only (probe_summary_ms, probe_samples_ms, load_fraction, background_load, ...),
// and the load plots and table draw every one of them.
TEST(HtmlReport, DrawsTheLoadScenariosOfAV01Report) {
  std::ifstream in(WCOMM_SOURCE_DIR "/tests/data/v01-report-four-load-scenarios.json");
  ASSERT_TRUE(in.good());
  const json report = json::parse(in);
  ASSERT_EQ(report["latency_under_load"].size(), 4u);
  ASSERT_FALSE(report["latency_under_load"][0].contains("rtt_ms"));  // V0.1's keys only
  const std::string html = render_html_report(report, "v01.json").html;
  const std::string summary = plot_svg(html, "load-rtt-vs-delivered");
  const std::string samples = plot_svg(html, "load-rtt-samples");
  EXPECT_EQ(summary.find("no latency-under-load scenarios"), std::string::npos);
  EXPECT_EQ(count_of(summary, "<circle class=\"point\""), 8u);  // p50 and p99 of each
  EXPECT_EQ(count_of(samples, "class=\"box\""), 4u);
  std::map<std::string, std::vector<std::string>> p50s, probes;
  for (const auto& scenario : report["latency_under_load"]) {
    const std::string direction = scenario["direction"];
    p50s[direction].push_back(exact_number(scenario["probe_summary_ms"]["p50"].get<double>()));
    for (const auto& v : exact_numbers(scenario["probe_samples_ms"])) probes[direction].push_back(v);
  }
  for (const auto& [direction, expected] : p50s) {
    auto got = point_values(summary, direction + " p50");
    std::sort(got.begin(), got.end());
    auto want = expected;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << direction;
    EXPECT_EQ(point_values(samples, direction), probes[direction]) << direction;
  }
  // The table has a row per scenario with its delivered load (V0.1's background_load.goodput_mbps).
  EXPECT_EQ(count_of(html.substr(html.find("id=\"load\"")), "<tr><th>upload</th>"), 2u);
  EXPECT_EQ(count_of(html.substr(html.find("id=\"load\"")), "<tr><th>download</th>"), 2u);
}

TEST(ReportCompat, FillsWcommKeysFromV01KeysAndKeepsWcommsOwn) {
  const json v01 = {{"direction", "upload"},
                    {"concurrency_per_direction", 4},
                    {"capacity_reference_mbps", 900.0},
                    {"load_fraction", 0.5},
                    {"probe_summary_ms", {{"p50", 1.5}}},
                    {"probe_samples_ms", {1.0, 2.0}},
                    {"background_load", {{"target_mbps", 450.0}, {"goodput_mbps", 440.0}, {"streams", 4}}},
                    {"delivered_load_fraction", 440.0 / 900.0}};
  const json filled = load_scenario_with_wcomm_keys(v01);
  EXPECT_EQ(filled["rtt_ms"], v01["probe_summary_ms"]);
  EXPECT_EQ(filled["samples_ms"], v01["probe_samples_ms"]);
  EXPECT_EQ(filled["target_fraction"], 0.5);
  EXPECT_EQ(filled["streams"], 4);
  EXPECT_EQ(filled["capacity_mbps"], 900.0);
  EXPECT_EQ(filled["target_mbps"], 450.0);
  EXPECT_EQ(filled["delivered_mbps"], 440.0);
  for (const auto& [key, value] : v01.items()) EXPECT_EQ(filled[key], value) << key;  // nothing of V0.1's lost
  // A wcomm scenario carries both: its own keys are kept as they are.
  json both = filled;
  both["delivered_mbps"] = 445.0;
  EXPECT_EQ(load_scenario_with_wcomm_keys(both)["delivered_mbps"], 445.0);
  // Not a scenario: left alone.
  EXPECT_EQ(load_scenario_with_wcomm_keys(json(3)), json(3));
  EXPECT_EQ(report_with_wcomm_keys(json{{"latency_under_load", nullptr}})["latency_under_load"], nullptr);
}

TEST(HtmlReport, SparseAndHostileReportsStillRender) {
  // An empty object, a wcomm report with null diagnostics placeholders, and text that would be
  // markup if it were not escaped.
  json placeholders = reference_report();
  for (const char* node : {"initiator", "responder"}) {
    for (const char* key : {"environment_before", "environment_after", "interface_counter_delta", "kernel_counter_delta",
                            "link_samples", "process_usage_delta"}) {
      placeholders[node][key] = nullptr;
    }
  }
  placeholders["ping_to_responder"] = nullptr;
  placeholders["responder_environment_at_handshake"] = nullptr;
  placeholders["initiator"]["node_id"] = "<script>alert('x')</script>";
  placeholders["latency"][0]["samples_ms"].push_back("not a number");
  for (const json& report : {json::object(), placeholders, json::array()}) {
    HtmlReport page;
    ASSERT_NO_THROW(page = render_html_report(report, "odd & <named>.json"));
    EXPECT_EQ(well_formedness_error(page.html), "");
    EXPECT_EQ(page.html.find("<script"), std::string::npos);
    EXPECT_EQ(page.html.find("<named>"), std::string::npos);
    for (const auto& plot : page.plots) EXPECT_EQ(well_formedness_error(render_svg(plot, true)), "") << plot.id;
  }
}

// A fan-out report as `wcomm bench fanout` writes it (fanout.cpp).
json fanout_report() {
  return {{"scenario", "fanout"},
          {"peers", 3},
          {"message_bytes", 1 << 20},
          {"duration_s", 10.0},
          {"in_flight_per_peer", 2},
          {"per_peer",
           {{{"peer", "sta-1"}, {"goodput_mbps", 41.5}, {"bytes", 51875000}},
            {{"peer", "sta-2"}, {"goodput_mbps", 40.25}, {"bytes", 50312500}},
            {{"peer", "<sta-3>"}, {"goodput_mbps", 20.125}, {"bytes", 25156250}}}},
          {"aggregate_goodput_mbps", 101.875},
          {"jain_index", 0.9158},
          {"chunk_bytes", 262144},
          {"stats", {{"messages_chunked", 12}, {"chunks_sent", 480}}}};
}

TEST(FanoutHtml, PlotsEveryPeersGoodputBesideTheFairShare) {
  const json report = fanout_report();
  ASSERT_TRUE(is_fanout_report(report));
  EXPECT_FALSE(is_fanout_report(reference_report()));
  const HtmlReport page = render_fanout_html(report, "fanout & co.json");
  EXPECT_EQ(well_formedness_error(page.html), "");
  ASSERT_EQ(page.plots.size(), 1u);
  const std::string svg = render_svg(page.plots[0], true);
  EXPECT_EQ(well_formedness_error(svg), "");
  EXPECT_EQ(point_values(svg, "goodput"), (std::vector<std::string>{"41.5", "40.25", "20.125"}));
  EXPECT_NE(page.html.find("<h1>Fan-out fairness: fanout &amp; co.json</h1>"), std::string::npos);
  EXPECT_NE(page.html.find("Jain's index 0.916"), std::string::npos);
  EXPECT_NE(page.html.find("&lt;sta-3&gt;"), std::string::npos);
  EXPECT_EQ(page.html.find("<sta-3>"), std::string::npos);
  // sta-3 got 20.125 of a 33.958 fair share.
  EXPECT_NE(page.html.find("<td class=\"num\">20.125</td><td class=\"num\">0.593</td>"), std::string::npos);
  EXPECT_NE(page.html.find("<th>chunks_sent</th><td>480</td>"), std::string::npos);
}

TEST(FanoutHtml, AReportWithoutPeersStillRenders) {
  json report = fanout_report();
  report["per_peer"] = json::array();
  report.erase("stats");
  const HtmlReport page = render_fanout_html(report, "empty.json");
  EXPECT_EQ(well_formedness_error(page.html), "");
  EXPECT_NE(page.html.find("no data in this run"), std::string::npos);
}

json flows_report() {
  auto run = [](const char* pattern, const char* design, std::vector<double> flows, double jain, double lag_mean_ms) {
    double sum = 0;
    for (double x : flows) sum += x;
    return json{{"pattern", pattern}, {"design", design},         {"flow_mbps", flows},
                {"sum_mbps", sum},    {"jain", jain},             {"lag", {{"windows", 10}, {"mean_ms", lag_mean_ms}}}};
  };
  return {{"scenario", "flows"},
          {"stations", 3},
          {"duration_s", 10},
          {"cell", "--stations 3 --width 40 --mcs 7"},
          {"runs",
           {run("upload", "iperf3", {36.25, 37.5, 42.25}, 0.995, 0.05),
            run("upload", "wcomm", {38.5, 42.75, 36.0}, 0.995, 0.06),
            run("upload", "v01 <asyncio>", {39.0, 41.25, 35.75}, 0.997, 0.04),
            run("fanout", "iperf3", {47.75, 37.5, 50.25}, 0.986, 0.05),
            run("fanout", "wcomm", {10.0, 20.0, 30.0}, 0.857, 2.5)}}};
}

TEST(FlowsHtml, PlotsEachPatternsFlowsPerDesignBesideTheFairShare) {
  const json report = flows_report();
  ASSERT_TRUE(is_flows_report(report));
  EXPECT_FALSE(is_flows_report(fanout_report()));
  EXPECT_FALSE(is_fanout_report(report));
  const HtmlReport page = render_flows_html(report, "flows.json");
  EXPECT_EQ(well_formedness_error(page.html), "");
  ASSERT_EQ(page.plots.size(), 2u);  // upload, then fan-out: the order the runs name them
  EXPECT_EQ(page.plots[0].id, "flows-upload");
  EXPECT_EQ(page.plots[1].id, "flows-fanout");
  const std::string upload = render_svg(page.plots[0], true);
  EXPECT_EQ(well_formedness_error(upload), "");
  // Station 1's flow under each design, in the runs' order.
  EXPECT_EQ(point_values(upload, "station 1"), (std::vector<std::string>{"36.25", "38.5", "39"}));
  EXPECT_EQ(point_values(upload, "station 3"), (std::vector<std::string>{"42.25", "36", "35.75"}));
  // One fair-share tick per design: iperf3's sum 116 over 3 flows.
  EXPECT_EQ(count_of(upload, "<line class=\"marker\" data-series=\"fair share\""), 3u);
  EXPECT_NE(upload.find("data-value=\"38.6666"), std::string::npos);
  EXPECT_NE(upload.find("v01 &lt;asyncio&gt;"), std::string::npos);
  EXPECT_EQ(page.html.find("v01 <asyncio>"), std::string::npos);
  // wcomm's upload sum against iperf3's: 117.25 / 116.
  EXPECT_NE(page.html.find("<td class=\"num\">117.250</td><td class=\"num\">0.995</td><td class=\"num\">1.011</td>"),
            std::string::npos);
}

TEST(FlowsHtml, ARunWhereTheEmulatorFellBehindIsShownInvalidAndLeftOutOfThePlot) {
  const HtmlReport page = render_flows_html(flows_report(), "flows.json");
  const std::string fanout = render_svg(page.plots[1], true);
  EXPECT_EQ(point_values(fanout, "station 1"), (std::vector<std::string>{"47.75"}));  // iperf3's only
  EXPECT_EQ(page.plots[1].x.categories, (std::vector<std::string>{"iperf3"}));
  EXPECT_NE(page.html.find("<td class=\"num\">2.500</td><td>no: the emulator fell behind real time</td>"),
            std::string::npos);
}

TEST(FlowsHtml, AReportWithoutRunsStillRenders) {
  json report = flows_report();
  report["runs"] = json::array();
  report.erase("cell");
  const HtmlReport page = render_flows_html(report, "empty.json");
  EXPECT_EQ(well_formedness_error(page.html), "");
  EXPECT_TRUE(page.plots.empty());
  EXPECT_NE(page.html.find("no runs in this report"), std::string::npos);
  EXPECT_NE(page.html.find("cell: not recorded"), std::string::npos);
}

TEST(HtmlReport, PythonXmlParserAcceptsThePageAndTheSvgFiles) {
  // A second, independent opinion: the page is XHTML-compatible, so a strict XML parser reads it.
  if (!find_executable("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  const fs::path dir = fs::temp_directory_path() / ("wcomm-html-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const HtmlReport page = render_html_report(enriched_report(), "run.json");
  std::vector<std::string> argv{"/usr/bin/python3", "-c",
                                "import sys, xml.etree.ElementTree as E\n"
                                "for f in sys.argv[1:]: E.parse(f)\n"
                                "print(len(sys.argv) - 1)"};
  {
    std::ofstream(dir / "run.html") << page.html;
    argv.push_back((dir / "run.html").string());
  }
  for (const auto& plot : page.plots) {
    std::ofstream(dir / (plot.id + ".svg")) << render_svg(plot, true);
    argv.push_back((dir / (plot.id + ".svg")).string());
  }
  CommandOptions options;
  options.timeout = std::chrono::seconds(60);
  const json result = run_command(argv, options);
  fs::remove_all(dir);
  EXPECT_EQ(result["returncode"], 0) << result["stderr"];
  EXPECT_EQ(result["stdout"], std::to_string(page.plots.size() + 1));
}

}  // namespace
}  // namespace wcomm::bench
