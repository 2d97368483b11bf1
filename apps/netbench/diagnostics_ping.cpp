// ping runs and the parser of its summary.
#include "netbench/diagnostics_ping.h"

#include <cmath>
#include <cstdio>

#include "netbench/diagnostics_text.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

}  // namespace

json parse_ping_output(std::string_view text) {
  json out = {{"transmitted", nullptr}, {"received", nullptr}, {"loss_percent", nullptr}, {"min_ms", nullptr},
              {"avg_ms", nullptr},      {"max_ms", nullptr},   {"jitter_ms", nullptr}};
  for (const std::string_view line : split_lines(text)) {
    // "3 packets transmitted, 3 received, 0% packet loss, time 2040ms"
    // "5 packets transmitted, 0 received, +5 errors, 100% packet loss, time 4082ms"
    if (line.find("packets transmitted") != std::string_view::npos) {
      const auto fields = split_fields(line);
      for (std::size_t i = 0; i + 1 < fields.size(); ++i) {
        const std::string_view next = fields[i + 1];
        // busybox says "3 packets received" where iputils says "3 received".
        const std::string_view word = next == "packets" && i + 2 < fields.size() ? fields[i + 2] : next;
        if (word.starts_with("transmitted")) {
          if (const auto v = parse_unsigned(fields[i])) out["transmitted"] = *v;
        } else if (word.starts_with("received")) {
          if (const auto v = parse_unsigned(fields[i])) out["received"] = *v;
        } else if (next == "packet" && fields[i].ends_with("%")) {
          if (const auto v = parse_leading_double(fields[i])) out["loss_percent"] = *v;
        }
      }
      continue;
    }
    // iputils: "rtt min/avg/max/mdev = 0.017/0.031/0.047/0.012 ms"
    // busybox: "round-trip min/avg/max = 0.017/0.031/0.047 ms"
    const std::size_t equals = line.find(" = ");
    if ((line.starts_with("rtt ") || line.starts_with("round-trip ")) && equals != std::string_view::npos) {
      const auto names_field = split_fields(line.substr(0, equals));
      const auto values_field = split_fields(line.substr(equals + 3));
      if (names_field.size() < 2 || values_field.empty()) continue;
      std::string_view names = names_field[1];
      std::string_view values = values_field[0];
      for (;;) {
        const std::size_t name_end = names.find('/');
        const std::size_t value_end = values.find('/');
        const std::string_view name = names.substr(0, name_end);
        const auto value = parse_leading_double(values.substr(0, value_end));
        if (value) {
          if (name == "min") out["min_ms"] = *value;
          else if (name == "avg") out["avg_ms"] = *value;
          else if (name == "max") out["max_ms"] = *value;
          else if (name == "mdev") out["jitter_ms"] = *value;
        }
        if (name_end == std::string_view::npos || value_end == std::string_view::npos) break;
        names.remove_prefix(name_end + 1);
        values.remove_prefix(value_end + 1);
      }
    }
  }
  // busybox prints no loss when it got everything back; derive it as V0.1's readers expect it.
  if (out["loss_percent"].is_null() && out["transmitted"].is_number() && out["received"].is_number()) {
    const double sent = out["transmitted"].get<double>();
    if (sent > 0) out["loss_percent"] = 100.0 * (sent - out["received"].get<double>()) / sent;
  }
  return out;
}

json run_ping(const std::string& host, const PingOptions& options) {
  std::vector<std::string> argv{"ping",
                                "-n",
                                "-c",
                                std::to_string(options.count),
                                "-i",
                                format_seconds(options.interval_s),
                                "-W",
                                format_seconds(options.wait_s)};
  if (!options.interface.empty()) {
    argv.push_back("-I");
    argv.push_back(options.interface);
  }
  argv.push_back(host);
  CommandOptions command = options.command;
  const double needed_s = static_cast<double>(options.count) * options.interval_s + options.wait_s + 5.0;
  const auto needed = std::chrono::milliseconds(static_cast<long long>(std::ceil(needed_s * 1000.0)));
  if (command.timeout < needed) command.timeout = needed;
  json result = run_command(argv, command);
  json out = parse_ping_output(result["stdout"].get<std::string>());
  out["command"] = std::move(result);
  return out;
}

nlohmann::json no_network_ping(const Peer& peer) {
  nlohmann::json out = parse_ping_output("");
  out["skipped"] = peer.node_id + " is reached only at " + peer.endpoints_text() + ": no network path to ping";
  return out;
}

}  // namespace wcomm::bench
