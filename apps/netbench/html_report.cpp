// The HTML page of a benchmark report: tables and inline SVG plots.
#include "netbench/html_report.h"

#include <algorithm>
#include <map>

#include "netbench/json_access.h"
#include "netbench/report_compat.h"
#include "netbench/report_plots.h"
#include "netbench/stats.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 24px auto; max-width: 1180px; padding: 0 16px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccc; padding-bottom: 4px; }
p.sub { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; font-size: 13px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { margin: 0; font-size: 12px; white-space: pre-wrap; max-width: 520px; }
figure { margin: 12px 0 28px; }
figcaption { font-size: 12px; color: #555; max-width: 760px; }
svg.plot { max-width: 100%; height: auto; border: 1px solid #eee; }
footer { margin-top: 40px; font-size: 12px; color: #777; }
)";

const std::vector<std::string> kNodes{"initiator", "responder"};

std::string e(const std::string& text) { return escape_xml(text); }

// A JSON value as table text.
std::string text_of(const json& value) {
  if (value.is_null()) return "n/a";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  if (value.is_number_integer() || value.is_number_unsigned()) return value.dump();
  if (value.is_number()) return readable_number(value.get<double>());
  if (value.is_array()) {
    std::string out;
    for (const auto& v : value) out += (out.empty() ? "" : ", ") + text_of(v);
    return out.empty() ? "none" : out;
  }
  return value.dump();
}

std::string cell(const std::string& text, bool numeric = false) {
  return std::string(numeric ? "<td class=\"num\">" : "<td>") + e(text) + "</td>";
}

std::string pre_cell(const std::string& text) {
  return text.find('\n') == std::string::npos ? cell(text) : "<td><pre>" + e(text) + "</pre></td>";
}

std::string number_cell(const json& value, const char* unit = "") {
  if (!value.is_number()) return cell("n/a", true);
  std::string text = text_of(value);
  if (*unit != '\0') text += std::string(" ") + unit;
  return cell(text, true);
}

std::string header_row(const std::vector<std::string>& headers) {
  std::string row = "<tr>";
  for (const auto& h : headers) row += "<th>" + e(h) + "</th>";
  return row + "</tr>\n";
}

std::string first_lines(const std::string& text, std::size_t max_lines) {
  std::size_t at = 0;
  for (std::size_t line = 0; line < max_lines; ++line) {
    at = text.find('\n', at);
    if (at == std::string::npos) return text;
    ++at;
  }
  return text.substr(0, at) + "...";
}

// A V0.1 command result as one table cell's text.
std::string command_text(const json& result, std::size_t max_lines = 8) {
  if (!result.is_object()) return "n/a";
  const std::string out = string_of(field(result, "stdout"));
  const std::string err = string_of(field(result, "stderr"));
  if (field(result, "available") == false) return "not available (" + err + ")";
  const json& code = field(result, "returncode");
  if (code != 0) {
    const std::string why = err.empty() ? out : err;
    return "failed (" + (code.is_null() ? std::string("no exit status") : "exit " + code.dump()) + "): " +
           first_lines(why, 2);
  }
  return out.empty() ? "(no output)" : first_lines(out, max_lines);
}

// A line of a command's stdout that starts with `prefix` (e.g. "driver:" of ethtool -i).
std::string command_line(const json& result, const std::string& prefix) {
  if (field(result, "returncode") != 0) return command_text(result);
  const std::string out = string_of(field(result, "stdout"));
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(start, end - start);
    const std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, prefix.size(), prefix) == 0) return line.substr(first);
    start = end + 1;
  }
  return "n/a";
}

// "127.0.0.1/8, ::1/128" from `ip -j address show` output.
std::string addresses_text(const json& result) {
  if (field(result, "returncode") != 0) return command_text(result);
  const json parsed = json::parse(string_of(field(result, "stdout")), nullptr, false);
  if (!parsed.is_array()) return command_text(result);
  std::string out;
  for (const auto& link : parsed) {
    const json& infos = field(link, "addr_info");
    if (!infos.is_array()) continue;
    for (const auto& info : infos) {
      const std::string local = string_of(field(info, "local"));
      if (local.empty()) continue;
      out += (out.empty() ? "" : ", ") + local;
      if (field(info, "prefixlen").is_number()) out += "/" + field(info, "prefixlen").dump();
    }
  }
  return out.empty() ? "none" : out;
}

std::string link_field_text(const json& env, const char* iw_key) {
  const json& fields = field_path(env, {"radio", "link_fields"});
  if (fields.is_object() && fields.contains(iw_key)) return text_of(fields[iw_key]);
  const json& link = field_path(env, {"radio", "link"});
  if (link.is_object() && field(link, "available") == false) return "n/a (" + string_of(field(link, "stderr")) + ")";
  return "n/a";
}

const json& node_environment(const json& report, const std::string& node) {
  const json& before = field_path(report, {node, "environment_before"});
  if (before.is_object()) return before;
  if (node == "responder" && field(report, "responder_environment_at_handshake").is_object())
    return field(report, "responder_environment_at_handshake");
  return field_path(report, {node, "environment_after"});
}

std::string memory_text(const json& memory, const char* key) {
  const auto kib = number_of(field(memory, key));
  return kib ? readable_number(*kib / 1024.0) + " MiB" : "n/a";
}

std::string run_section(const json& report) {
  std::string html = "<h2 id=\"run\">Run</h2>\n<table>\n";
  auto row = [&](const std::string& name, const std::string& value) {
    html += "<tr><th>" + e(name) + "</th>" + cell(value) + "</tr>\n";
  };
  row("started at", text_of(field(report, "started_at")));
  row("finished at", text_of(field(report, "finished_at")));
  row("transport", text_of(field(report, "transport")));
  row("schema version", text_of(field(report, "schema_version")));
  const auto setup = number_of(field(report, "connection_setup_ms"));
  row("first-connection cost", setup ? readable_number(*setup) + " ms" : "n/a");
  for (const auto& node : kNodes) {
    row(node, text_of(field_path(report, {node, "node_id"})) + " on interface " +
                  text_of(field_path(report, {node, "interface"})));
  }
  const json& implementation = field_path(report, {"wcomm", "implementation"});
  if (implementation.is_string())
    row("written by", text_of(implementation) + " " + text_of(field_path(report, {"wcomm", "version"})));
  html += "</table>\n";

  html += "<h3>ICMP ping</h3>\n<table>\n" +
          header_row({"direction", "sent", "received", "loss", "min", "avg", "max", "jitter (mdev)", "command"});
  for (const auto& [key, label] : std::vector<std::pair<std::string, std::string>>{
           {"ping_to_responder", "initiator to responder"}, {"ping_to_initiator", "responder to initiator"}}) {
    const json& ping = field(report, key);
    html += "<tr><th>" + e(label) + "</th>" + number_cell(field(ping, "transmitted")) + number_cell(field(ping, "received")) +
            number_cell(field(ping, "loss_percent"), "%") + number_cell(field(ping, "min_ms"), "ms") +
            number_cell(field(ping, "avg_ms"), "ms") + number_cell(field(ping, "max_ms"), "ms") +
            number_cell(field(ping, "jitter_ms"), "ms") +
            cell(ping.is_object() ? text_of(field_path(ping, {"command", "command"})) : "not collected") + "</tr>\n";
  }
  html += "</table>\n";
  return html;
}

std::string settings_section(const json& report) {
  std::string html = "<h2 id=\"settings\">Settings</h2>\n<table>\n" + header_row({"setting", "value"});
  const json& settings = field(report, "settings");
  if (settings.is_object()) {
    for (const auto& [key, value] : settings.items()) html += "<tr><th>" + e(key) + "</th>" + cell(text_of(value)) + "</tr>\n";
  }
  return html + "</table>\n";
}

std::string environment_section(const json& report) {
  std::string html = "<h2 id=\"environment\">Environment</h2>\n<p class=\"sub\">Each node's snapshot before the "
                     "measurements (environment_before).</p>\n<table>\n" +
                     header_row({"", "initiator", "responder"});
  std::vector<const json*> envs;
  for (const auto& node : kNodes) envs.push_back(&node_environment(report, node));
  auto row = [&](const std::string& name, auto&& value_of) {
    html += "<tr><th>" + e(name) + "</th>";
    for (const json* env : envs) html += env->is_object() ? pre_cell(value_of(*env)) : cell("not collected");
    html += "</tr>\n";
  };
  row("host", [](const json& env) { return text_of(field(env, "hostname")); });
  row("platform", [](const json& env) { return text_of(field(env, "platform")); });
  row("CPUs", [](const json& env) { return text_of(field(env, "cpu_count")) + " (" + text_of(field(env, "machine")) + ")"; });
  row("load average (1, 5, 15 min)", [](const json& env) { return text_of(field(env, "load_average")); });
  row("memory total / available", [](const json& env) {
    return memory_text(field(env, "memory"), "MemTotal_kib") + " / " + memory_text(field(env, "memory"), "MemAvailable_kib");
  });
  row("interface", [](const json& env) {
    const json& i = field(env, "interface");
    if (!i.is_object()) return std::string("n/a");
    return text_of(field(i, "name")) + " (" + text_of(field(i, "operstate")) + "), MAC " + text_of(field(i, "address")) +
           ", MTU " + text_of(field(i, "mtu"));
  });
  row("addresses", [](const json& env) { return addresses_text(field_path(env, {"interface", "addresses"})); });
  row("route to the peer", [](const json& env) { return command_text(field(env, "route")); });
  row("queueing discipline", [](const json& env) { return command_text(field(env, "qdisc"), 3); });
  row("TCP congestion control", [](const json& env) {
    const json& tcp = field(env, "tcp");
    return text_of(field(tcp, "congestion_control")) + " (available: " + text_of(field(tcp, "available_congestion_control")) +
           "), default qdisc " + text_of(field(tcp, "default_qdisc")) + ", MTU probing " +
           text_of(field(tcp, "tcp_mtu_probing"));
  });
  row("TCP buffers rmem / wmem", [](const json& env) {
    return text_of(field_path(env, {"tcp", "tcp_rmem"})) + " / " + text_of(field_path(env, {"tcp", "tcp_wmem"}));
  });
  row("SSID", [](const json& env) { return link_field_text(env, "SSID"); });
  row("access point", [](const json& env) { return link_field_text(env, "access_point"); });
  row("frequency (MHz)", [](const json& env) { return link_field_text(env, "freq"); });
  row("signal", [](const json& env) { return link_field_text(env, "signal"); });
  row("tx bitrate", [](const json& env) { return link_field_text(env, "tx bitrate"); });
  row("rx bitrate", [](const json& env) { return link_field_text(env, "rx bitrate"); });
  row("regulatory domain", [](const json& env) { return command_line(field_path(env, {"radio", "regulatory_domain"}), "country"); });
  row("power save", [](const json& env) { return command_text(field_path(env, {"radio", "power_save"}), 2); });
  row("driver", [](const json& env) { return command_line(field_path(env, {"radio", "driver"}), "driver:"); });
  row("clock sync", [](const json& env) { return command_text(field(env, "clock_sync"), 3); });
  row("power mode", [](const json& env) { return command_text(field(env, "power_mode"), 3); });
  return html + "</table>\n";
}

std::string figure(const Plot& plot) {
  return "<figure>\n" + render_svg(plot, false) + "<figcaption>" + e(plot.note) + "</figcaption>\n</figure>\n";
}

std::string figures(const std::vector<Plot>& plots, const std::string& prefix) {
  std::string html;
  for (const auto& plot : plots) {
    if (plot.id.starts_with(prefix)) html += figure(plot);
  }
  return html;
}

json summary_or_computed(const json& summary, const json& samples) {
  if (summary.is_object()) return summary;
  return summarize(numbers_of(samples));
}

std::string latency_section(const json& report, const std::vector<Plot>& plots) {
  std::string html = "<h2 id=\"latency\">Round-trip time</h2>\n" + figures(plots, "rtt-") + "<table>\n" +
                     header_row({"payload", "rounds", "min", "p50", "p90", "p99", "p99.9", "max", "mean", "stddev",
                                 "jitter (mean |delta|)", "outliers"});
  const json& latency = field(report, "latency");
  if (latency.is_array()) {
    for (const auto& entry : latency) {
      const json s = summary_or_computed(field(entry, "summary_ms"), field(entry, "samples_ms"));
      html += "<tr><th>" + e(format_bytes(number_of(field(entry, "payload_bytes")).value_or(0))) + "</th>" +
              number_cell(field(entry, "rounds"));
      for (const char* key : {"min", "p50", "p90", "p99", "p99_9", "max", "mean", "stddev", "jitter_mean_abs_delta"})
        html += number_cell(field(s, key), "ms");
      const auto fraction = number_of(field(s, "outlier_fraction"));
      html += cell(fraction ? readable_number(*fraction * 100.0) + "%" : "n/a", true) + "</tr>\n";
    }
  }
  return html + "</table>\n";
}

std::string throughput_section(const json& report, const std::vector<Plot>& plots) {
  std::string html = "<h2 id=\"throughput\">Goodput</h2>\n" + figures(plots, "goodput-") + "<table>\n" +
                     header_row({"direction", "message size", "messages", "trials", "p50", "min", "max",
                                 "coefficient of variation", "messages/s p50"});
  const json& throughput = field(report, "throughput");
  for (const char* direction : {"upload", "download", "bidirectional"}) {
    const json& entries = field(throughput, direction);
    if (!entries.is_array()) continue;
    for (const auto& entry : entries) {
      const json& g = field(entry, "aggregate_goodput_mbps");
      html += "<tr><th>" + e(direction) + "</th>" +
              cell(format_bytes(number_of(field(entry, "payload_bytes_per_message")).value_or(0)), true) +
              number_cell(field(entry, "messages_per_direction")) + number_cell(field(entry, "trial_count")) +
              number_cell(field(g, "p50"), "Mbit/s") + number_cell(field(g, "min"), "Mbit/s") +
              number_cell(field(g, "max"), "Mbit/s") + number_cell(field(g, "coefficient_of_variation")) +
              number_cell(field_path(entry, {"messages_per_s", "p50"})) + "</tr>\n";
    }
  }
  return html + "</table>\n";
}

std::string load_section(const json& report, const std::vector<Plot>& plots) {
  std::string html = "<h2 id=\"load\">Latency under load</h2>\n" + figures(plots, "load-") + "<table>\n" +
                     header_row({"direction", "streams", "target fraction", "target", "delivered", "RTT p50", "RTT p99",
                                 "probes"});
  const json& scenarios = field(report, "latency_under_load");
  if (scenarios.is_array()) {
    for (const auto& s : scenarios) {
      const json summary = summary_or_computed(field(s, "rtt_ms"), field(s, "samples_ms"));
      const auto fraction = number_of(field(s, "target_fraction"));
      // wcomm's tensor background (tensors over the foreground Comm) is labelled as such.
      const bool tensor = field(s, "background").is_string() && field(s, "background") == "tensor";
      html += "<tr><th>" + e(text_of(field(s, "direction")) + (tensor ? " (tensor)" : "")) + "</th>" +
              number_cell(field(s, "streams")) +
              cell(fraction ? readable_number(*fraction * 100.0) + "%" : "n/a", true) +
              number_cell(field(s, "target_mbps"), "Mbit/s") + number_cell(field(s, "delivered_mbps"), "Mbit/s") +
              number_cell(field(summary, "p50"), "ms") + number_cell(field(summary, "p99"), "ms") +
              number_cell(field(s, "samples_ms").is_array() ? json(field(s, "samples_ms").size())
                                                            : field(summary, "sample_count")) +
              "</tr>\n";
    }
  }
  return html + "</table>\n";
}

std::string counters_section(const json& report) {
  std::string html = "<h2 id=\"counters\">Counters over the run</h2>\n<p class=\"sub\">Differences between each "
                     "node's snapshots before and after the run (interface_counter_delta, kernel_counter_delta) and "
                     "the benchmark process's own usage (process_usage_delta).</p>\n<table>\n" +
                     header_row({"", "initiator", "responder"});
  auto row = [&](const std::string& name, std::initializer_list<std::string_view> path, const char* unit = "") {
    html += "<tr><th>" + e(name) + "</th>";
    for (const auto& node : kNodes) html += number_cell(field_path(field(report, node), path), unit);
    html += "</tr>\n";
  };
  auto list_row = [&](const std::string& name, std::initializer_list<std::string_view> path) {
    html += "<tr><th>" + e(name) + "</th>";
    for (const auto& node : kNodes) html += cell(text_of(field_path(field(report, node), path)));
    html += "</tr>\n";
  };
  row("observation", {"process_observation_duration_s"}, "s");
  row("process user CPU", {"process_usage_delta", "user_cpu_s"}, "s");
  row("process system CPU", {"process_usage_delta", "system_cpu_s"}, "s");
  row("process CPU per second (user)", {"process_usage_rates_per_s", "user_cpu_s"});
  row("process CPU per second (system)", {"process_usage_rates_per_s", "system_cpu_s"});
  row("process voluntary context switches", {"process_usage_delta", "voluntary_context_switches"});
  row("process involuntary context switches", {"process_usage_delta", "involuntary_context_switches"});
  row("process peak RSS", {"process_usage_delta", "max_rss_kib"}, "KiB");
  for (const char* counter : {"rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors", "rx_dropped",
                              "tx_dropped"}) {
    row(std::string("interface ") + counter, {"interface_counter_delta", counter});
  }
  row("context switches (all CPUs)", {"kernel_counter_delta", "context_switches"});
  for (const char* kind : {"NET_RX", "NET_TX"}) {
    row(std::string(kind) + " softirqs", {"kernel_counter_delta", "softirqs", kind, "total"});
    list_row(std::string(kind) + " softirqs per CPU", {"kernel_counter_delta", "softirqs", kind, "per_cpu"});
  }
  for (const char* column : {"processed", "dropped", "time_squeeze", "cpu_collision", "received_rps", "flow_limit_count"}) {
    row(std::string("softnet ") + column, {"kernel_counter_delta", "softnet", column, "total"});
  }
  row("interface IRQs", {"kernel_counter_delta", "interface_irq", "total"});
  list_row("interface IRQs per CPU", {"kernel_counter_delta", "interface_irq", "per_cpu"});
  return html + "</table>\n";
}

}  // namespace

HtmlReport render_html_report(const json& input, const std::string& source_name) {
  // A V0.1 report's load scenarios are read through wcomm's key names.
  const json report = report_with_wcomm_keys(input);
  HtmlReport out;
  out.plots = report_plots(report);
  std::string& html = out.html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n";
  html += "<title>wcomm bench report: " + e(source_name) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  html += "<h1>wcomm bench report</h1>\n<p class=\"sub\">" + e(source_name) + ": " +
          e(text_of(field_path(report, {"initiator", "node_id"}))) + " to " +
          e(text_of(field_path(report, {"responder", "node_id"}))) + ", started " + e(text_of(field(report, "started_at"))) +
          "</p>\n";
  html += run_section(report);
  html += settings_section(report);
  html += environment_section(report);
  html += latency_section(report, out.plots);
  html += throughput_section(report, out.plots);
  html += load_section(report, out.plots);
  html += counters_section(report);
  html += "<h2 id=\"samples\">Link samples</h2>\n";
  for (const auto& node : kNodes) html += figures(out.plots, node + "-");
  html += "<footer>Written by wcomm report from " + e(source_name) +
          ". Self-contained: the plots are inline SVG and nothing is loaded from elsewhere.</footer>\n</body>\n</html>\n";
  return out;
}

}  // namespace wcomm::bench
