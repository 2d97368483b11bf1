// Building the report's plots from the report JSON.
#include "netbench/report_plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "netbench/json_access.h"
#include "netbench/stats.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

const std::vector<std::string> kDirections{"upload", "download", "bidirectional"};

// A deterministic spread of k-th point within [-0.5, 0.5) (golden-ratio sequence), so strip
// plots do not stack points on one vertical line and the page is the same on every render.
double spread(std::size_t k) {
  const double f = std::fmod(static_cast<double>(k) * 0.6180339887498949, 1.0);
  return f - 0.5;
}

std::string unit_number(double value, const char* unit) { return readable_number(value) + " " + unit; }

// A log axis reads better once the values span more than ~1.5 decades (Wi-Fi RTT tails).
bool wants_log(const std::vector<double>& values) {
  double lo = 0.0;
  double hi = 0.0;
  bool any = false;
  for (const double v : values) {
    if (!(v > 0.0)) return false;  // a log axis would drop it
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  }
  return any && hi / lo > 30.0;
}

struct Quantiles {
  double p05, p25, p50, p75, p95;
};

std::optional<Quantiles> quantiles_of(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  return Quantiles{percentile_sorted(values, 5), percentile_sorted(values, 25), percentile_sorted(values, 50),
                   percentile_sorted(values, 75), percentile_sorted(values, 95)};
}

std::size_t direction_index(const std::string& direction) {
  const auto it = std::find(kDirections.begin(), kDirections.end(), direction);
  return it == kDirections.end() ? kDirections.size() : static_cast<std::size_t>(it - kDirections.begin());
}

Plot rtt_by_size(const json& report) {
  Plot plot;
  plot.id = "rtt-by-size";
  plot.title = "Round-trip time by payload size";
  plot.note = "Each point is one timed ping (latency[].samples_ms); boxes span p25-p75 with whiskers at p05 and p95, "
              "the thick line is the median.";
  plot.x.label = "payload size";
  plot.y.label = "RTT (ms)";
  const json& latency = field(report, "latency");
  std::vector<double> all;
  if (latency.is_array()) {
    for (std::size_t i = 0; i < latency.size(); ++i) {
      const json& entry = latency[i];
      const std::vector<double> samples = numbers_of(field(entry, "samples_ms"));
      const std::string size = format_bytes(number_of(field(entry, "payload_bytes")).value_or(0.0));
      plot.x.categories.push_back(size);
      PlotSeries series;
      series.name = "payload " + size;
      series.color = palette_color(i);
      for (std::size_t k = 0; k < samples.size(); ++k) {
        series.points.push_back({static_cast<double>(i) + 0.55 * spread(k), samples[k],
                                 size + " ping " + std::to_string(k + 1) + ": " + unit_number(samples[k], "ms")});
      }
      if (const auto q = quantiles_of(samples)) {
        plot.boxes.push_back({static_cast<double>(i), 0.32, q->p05, q->p25, q->p50, q->p75, q->p95, series.name, series.color,
                              size + ": p50 " + unit_number(q->p50, "ms") + ", p95 " + unit_number(q->p95, "ms")});
      }
      all.insert(all.end(), samples.begin(), samples.end());
      plot.series.push_back(std::move(series));
    }
  }
  plot.y.log_scale = wants_log(all);
  plot.empty_message = "no latency samples in this run";
  return plot;
}

Plot goodput_by_size(const json& report) {
  Plot plot;
  plot.id = "goodput-by-size";
  plot.title = "Goodput by message size and direction";
  plot.note = "Each point is one trial's aggregate goodput (throughput.<direction>[].trials[].aggregate_goodput_mbps); "
              "the bar is the median over the trials.";
  plot.x.label = "message size";
  plot.y.label = "aggregate goodput (Mbit/s)";
  plot.y.include_zero = true;
  const json& throughput = field(report, "throughput");
  std::vector<double> sizes;
  for (const auto& direction : kDirections) {
    const json& entries = field(throughput, direction);
    if (!entries.is_array()) continue;
    for (const auto& entry : entries) {
      if (const auto size = number_of(field(entry, "payload_bytes_per_message"))) sizes.push_back(*size);
    }
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (const double size : sizes) plot.x.categories.push_back(format_bytes(size));
  for (std::size_t d = 0; d < kDirections.size(); ++d) {
    const std::string& direction = kDirections[d];
    const json& entries = field(throughput, direction);
    if (!entries.is_array() || entries.empty()) continue;
    PlotSeries series;
    series.name = direction;
    series.color = palette_color(d);
    series.radius = 3.5;
    series.opacity = 0.8;
    const double offset = (static_cast<double>(d) - 1.0) * 0.27;
    for (const auto& entry : entries) {
      const auto size = number_of(field(entry, "payload_bytes_per_message"));
      if (!size) continue;
      const double x = static_cast<double>(std::lower_bound(sizes.begin(), sizes.end(), *size) - sizes.begin()) + offset;
      const std::string size_label = format_bytes(*size);
      std::vector<double> trial_values;
      const json& trials = field(entry, "trials");
      if (trials.is_array()) {
        for (std::size_t t = 0; t < trials.size(); ++t) {
          const auto mbps = number_of(field(trials[t], "aggregate_goodput_mbps"));
          if (!mbps) continue;
          trial_values.push_back(*mbps);
          series.points.push_back({x + 0.16 * spread(t), *mbps,
                                   direction + " " + size_label + " trial " + std::to_string(t + 1) + ": " +
                                       unit_number(*mbps, "Mbit/s")});
        }
      }
      std::optional<double> p50 = number_of(field_path(entry, {"aggregate_goodput_mbps", "p50"}));
      if (!p50 && !trial_values.empty()) p50 = quantiles_of(trial_values)->p50;
      if (p50) {
        plot.markers.push_back({x - 0.11, x + 0.11, *p50, direction, series.color,
                                direction + " " + size_label + " median: " + unit_number(*p50, "Mbit/s")});
      }
    }
    plot.series.push_back(std::move(series));
  }
  plot.empty_message = "no throughput trials in this run";
  return plot;
}

std::string scenario_label(const json& scenario) {
  std::string label = string_of(field(scenario, "direction"), "?");
  if (const auto streams = number_of(field(scenario, "streams"))) label += " x" + readable_number(*streams);
  if (const auto fraction = number_of(field(scenario, "target_fraction"))) label += " " + readable_number(*fraction * 100.0) + "%";
  return label;
}

std::optional<double> scenario_rtt(const json& scenario, const char* percentile) {
  if (const auto value = number_of(field_path(scenario, {"rtt_ms", percentile}))) return value;
  std::vector<double> samples = numbers_of(field(scenario, "samples_ms"));
  if (samples.empty()) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  return percentile_sorted(samples, std::string(percentile) == "p50" ? 50.0 : 99.0);
}

Plot load_rtt_vs_delivered(const json& report) {
  Plot plot;
  plot.id = "load-rtt-vs-delivered";
  plot.title = "Latency under load: foreground RTT against delivered background load";
  plot.note = "One p50 (filled) and one p99 (ring, dashed line) point per scenario (latency_under_load[]), at the "
              "background load it delivered; a line joins the scenarios of one direction and stream count.";
  plot.x.label = "delivered background load (Mbit/s)";
  plot.y.label = "foreground RTT (ms)";
  plot.x.include_zero = true;
  const json& scenarios = field(report, "latency_under_load");
  std::map<std::size_t, std::vector<const json*>> by_direction;
  if (scenarios.is_array()) {
    for (const auto& s : scenarios) by_direction[direction_index(string_of(field(s, "direction")))].push_back(&s);
  }
  std::vector<double> all;
  for (auto& [d, list] : by_direction) {
    std::stable_sort(list.begin(), list.end(), [](const json* a, const json* b) {
      return number_of(field(*a, "delivered_mbps")).value_or(0) < number_of(field(*b, "delivered_mbps")).value_or(0);
    });
    const std::string direction = d < kDirections.size() ? kDirections[d] : string_of(field(*list[0], "direction"), "other");
    // Lines join the scenarios of one stream count, so each line is one load sweep.
    std::stable_sort(list.begin(), list.end(), [](const json* a, const json* b) {
      return number_of(field(*a, "streams")).value_or(0) < number_of(field(*b, "streams")).value_or(0);
    });
    for (const char* percentile : {"p50", "p99"}) {
      const bool p99 = std::string(percentile) == "p99";
      PlotSeries series;
      series.name = direction + " " + percentile;
      series.color = palette_color(d);
      series.hollow = p99;
      series.dashed = p99;
      series.draw_line = true;
      series.radius = 4.0;
      series.opacity = 0.85;
      for (const json* s : list) {
        const auto delivered = number_of(field(*s, "delivered_mbps"));
        const auto rtt = scenario_rtt(*s, percentile);
        if (!delivered || !rtt) continue;
        std::string label = scenario_label(*s) + ": delivered " + unit_number(*delivered, "Mbit/s");
        if (const auto target = number_of(field(*s, "target_mbps"))) label += " of " + unit_number(*target, "Mbit/s") + " target";
        label += ", " + std::string(percentile) + " " + unit_number(*rtt, "ms");
        series.points.push_back({*delivered, *rtt, label, static_cast<int>(number_of(field(*s, "streams")).value_or(0))});
        all.push_back(*rtt);
      }
      plot.series.push_back(std::move(series));
    }
  }
  plot.y.log_scale = wants_log(all);
  plot.empty_message = "no latency-under-load scenarios in this run";
  return plot;
}

Plot load_rtt_samples(const json& report) {
  Plot plot;
  plot.id = "load-rtt-samples";
  plot.title = "Latency under load: foreground RTT samples per scenario";
  plot.note = "Each point is one foreground probe (latency_under_load[].samples_ms); boxes as in the RTT plot. "
              "Labels read direction, background streams and target fraction of the measured capacity.";
  plot.x.label = "scenario";
  plot.y.label = "foreground RTT (ms)";
  const json& scenarios = field(report, "latency_under_load");
  std::map<std::size_t, PlotSeries> series_by_direction;
  std::vector<double> all;
  if (scenarios.is_array()) {
    for (std::size_t i = 0; i < scenarios.size(); ++i) {
      const json& s = scenarios[i];
      const std::string label = scenario_label(s);
      plot.x.categories.push_back(label);
      const std::string direction = string_of(field(s, "direction"), "other");
      const std::size_t d = direction_index(direction);
      PlotSeries& series = series_by_direction[d];
      series.name = direction;
      series.color = palette_color(d);
      const std::vector<double> samples = numbers_of(field(s, "samples_ms"));
      for (std::size_t k = 0; k < samples.size(); ++k) {
        series.points.push_back({static_cast<double>(i) + 0.55 * spread(k), samples[k],
                                 label + " probe " + std::to_string(k + 1) + ": " + unit_number(samples[k], "ms")});
      }
      if (const auto q = quantiles_of(samples)) {
        plot.boxes.push_back({static_cast<double>(i), 0.32, q->p05, q->p25, q->p50, q->p75, q->p95, direction, series.color,
                              label + ": p50 " + unit_number(q->p50, "ms") + ", p95 " + unit_number(q->p95, "ms")});
      }
      all.insert(all.end(), samples.begin(), samples.end());
    }
  }
  for (auto& [d, series] : series_by_direction) plot.series.push_back(std::move(series));
  plot.y.log_scale = wants_log(all);
  plot.width = std::max(760, 70 * static_cast<int>(plot.x.categories.size()) + 120);
  plot.empty_message = "no latency-under-load scenarios in this run";
  return plot;
}

// Rates between consecutive link samples of one counter, at the end time of each interval.
std::vector<PlotPoint> sample_rates(const json& samples, std::initializer_list<std::string_view> path, double scale,
                                    const std::string& name, const char* unit) {
  std::vector<PlotPoint> points;
  if (!samples.is_array() || samples.empty()) return points;
  const auto t0 = number_of(field(samples[0], "captured_at_unix_s"));
  for (std::size_t i = 1; i < samples.size(); ++i) {
    const auto t_prev = number_of(field(samples[i - 1], "captured_at_unix_s"));
    const auto t = number_of(field(samples[i], "captured_at_unix_s"));
    const auto before = number_of(field_path(samples[i - 1], path));
    const auto after = number_of(field_path(samples[i], path));
    if (!t0 || !t_prev || !t || !before || !after || !(*t > *t_prev)) continue;
    const double rate = (*after - *before) * scale / (*t - *t_prev);
    points.push_back({*t - *t0, rate,
                      name + " at +" + readable_number(*t - *t0) + " s: " + unit_number(rate, unit)});
  }
  return points;
}

// A value of each link sample's link_fields (typed key first, then iw's own string), over time.
std::vector<PlotPoint> sample_values(const json& samples, const char* typed_key, const char* iw_key, const std::string& name,
                                     const char* unit) {
  std::vector<PlotPoint> points;
  if (!samples.is_array() || samples.empty()) return points;
  const auto t0 = number_of(field(samples[0], "captured_at_unix_s"));
  for (const auto& sample : samples) {
    const json& fields = field(sample, "link_fields");
    std::optional<double> value = number_of(field(fields, typed_key));
    if (!value && field(fields, iw_key).is_string()) {
      const std::string text = field(fields, iw_key).get<std::string>();
      char* end = nullptr;
      const double parsed = std::strtod(text.c_str(), &end);
      if (end != text.c_str()) value = parsed;
    }
    const auto t = number_of(field(sample, "captured_at_unix_s"));
    if (!value || !t || !t0) continue;
    points.push_back({*t - *t0, *value, name + " at +" + readable_number(*t - *t0) + " s: " + unit_number(*value, unit)});
  }
  return points;
}

// `second`: the second series of a pair (tx beside rx), drawn dashed with smaller points so
// equal values (loopback: rx == tx) still show both.
PlotSeries line_series(std::string name, std::size_t color, std::vector<PlotPoint> points, bool second = false) {
  PlotSeries series;
  series.name = std::move(name);
  series.color = palette_color(color);
  series.points = std::move(points);
  series.draw_line = true;
  series.dashed = second;
  series.radius = second ? 2.5 : 4.0;
  series.opacity = 0.9;
  return series;
}

void add_node_plots(std::vector<Plot>& plots, const json& report, const std::string& node) {
  const json& samples = field_path(report, {node, "link_samples"});
  const std::string count = samples.is_array() ? std::to_string(samples.size()) : "no";

  Plot rate;
  rate.id = node + "-interface-rate";
  rate.title = node + ": interface throughput over time";
  rate.note = "From " + count + " link samples of " + node +
              ".link_samples (interface_statistics): bytes between consecutive samples x 8 / interval; time from the "
              "first sample.";
  rate.x.label = "time since the first sample (s)";
  rate.y.label = "Mbit/s";
  rate.y.include_zero = true;
  rate.series.push_back(line_series("rx Mbit/s", 0, sample_rates(samples, {"interface_statistics", "rx_bytes"}, 8e-6, "rx", "Mbit/s")));
  rate.series.push_back(
      line_series("tx Mbit/s", 1, sample_rates(samples, {"interface_statistics", "tx_bytes"}, 8e-6, "tx", "Mbit/s"), true));
  rate.empty_message = "fewer than two link samples from " + node;
  plots.push_back(std::move(rate));

  Plot softirq;
  softirq.id = node + "-softirq-rate";
  softirq.title = node + ": network softirqs over time";
  softirq.note = "NET_RX and NET_TX softirqs per second, all CPUs (" + node +
                 ".link_samples[].kernel_network_counters.softirqs), between consecutive samples.";
  softirq.x.label = "time since the first sample (s)";
  softirq.y.label = "softirqs per second";
  softirq.y.include_zero = true;
  softirq.series.push_back(line_series(
      "NET_RX/s", 2, sample_rates(samples, {"kernel_network_counters", "softirqs", "NET_RX", "total"}, 1.0, "NET_RX", "/s")));
  softirq.series.push_back(line_series(
      "NET_TX/s", 3, sample_rates(samples, {"kernel_network_counters", "softirqs", "NET_TX", "total"}, 1.0, "NET_TX", "/s"),
      true));
  softirq.empty_message = "fewer than two link samples from " + node;
  plots.push_back(std::move(softirq));

  auto signal = sample_values(samples, "signal_dbm", "signal", "signal", "dBm");
  if (!signal.empty()) {
    Plot plot;
    plot.id = node + "-signal";
    plot.title = node + ": received signal over time";
    plot.note = "Signal of each link sample (" + node + ".link_samples[].link_fields, from iw dev IF link).";
    plot.x.label = "time since the first sample (s)";
    plot.y.label = "signal (dBm)";
    plot.series.push_back(line_series("signal dBm", 4, std::move(signal)));
    plots.push_back(std::move(plot));
  }
  auto rx_rate = sample_values(samples, "rx_bitrate_mbps", "rx bitrate", "rx bitrate", "Mbit/s");
  auto tx_rate = sample_values(samples, "tx_bitrate_mbps", "tx bitrate", "tx bitrate", "Mbit/s");
  if (!rx_rate.empty() || !tx_rate.empty()) {
    Plot plot;
    plot.id = node + "-phy-bitrate";
    plot.title = node + ": PHY bitrate over time";
    plot.note = "rx / tx bitrate of each link sample (" + node + ".link_samples[].link_fields, from iw dev IF link).";
    plot.x.label = "time since the first sample (s)";
    plot.y.label = "PHY bitrate (Mbit/s)";
    plot.y.include_zero = true;
    plot.series.push_back(line_series("rx bitrate", 5, std::move(rx_rate)));
    plot.series.push_back(line_series("tx bitrate", 6, std::move(tx_rate), true));
    plots.push_back(std::move(plot));
  }
}

}  // namespace

std::string format_bytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  while (std::abs(bytes) >= 1024.0 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.4g %s", bytes, kUnits[unit]);
  return text;
}

std::vector<Plot> report_plots(const json& report) {
  std::vector<Plot> plots;
  plots.push_back(rtt_by_size(report));
  plots.push_back(goodput_by_size(report));
  plots.push_back(load_rtt_vs_delivered(report));
  plots.push_back(load_rtt_samples(report));
  add_node_plots(plots, report, "initiator");
  add_node_plots(plots, report, "responder");
  return plots;
}

}  // namespace wcomm::bench
