// iw / ethtool radio diagnostics and the parser of `iw dev IF link`.
#include "netbench/diagnostics_radio.h"

#include "netbench/diagnostics_text.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

// "1823450 bytes (12034 packets)" -> (bytes, packets).
void add_byte_packet_counts(json& out, const std::string& prefix, std::string_view value) {
  const auto fields = split_fields(value);
  if (fields.size() >= 2 && fields[1] == "bytes") {
    if (const auto bytes = parse_unsigned(fields[0])) out[prefix + "_bytes"] = *bytes;
  }
  if (fields.size() >= 4 && fields[3].starts_with("packets")) {
    std::string_view packets = fields[2];
    if (packets.starts_with("(")) packets.remove_prefix(1);
    if (const auto n = parse_unsigned(packets)) out[prefix + "_packets"] = *n;
  }
}

// iw prints bitrates as "866.7 MBit/s ..."; older versions wrote "MBit/s" too, newer may add
// units like "Gbit/s" in the future: convert what we know, skip the rest.
std::optional<double> bitrate_mbps(std::string_view value) {
  const auto fields = split_fields(value);
  if (fields.size() < 2) return std::nullopt;
  const auto number = parse_leading_double(fields[0]);
  if (!number) return std::nullopt;
  const std::string_view unit = fields[1];
  if (unit == "MBit/s" || unit == "Mbit/s") return *number;
  if (unit == "GBit/s" || unit == "Gbit/s") return *number * 1000.0;
  if (unit == "kBit/s" || unit == "Kbit/s") return *number / 1000.0;
  return std::nullopt;
}

}  // namespace

json parse_iw_link(std::string_view text) {
  json out = json::object();
  for (const std::string_view raw : split_lines(text)) {
    const std::string line = strip_whitespace(raw);
    if (line.empty()) continue;
    if (line.starts_with("Not connected")) {
      out["connected"] = false;
      continue;
    }
    if (line.starts_with("Connected to ")) {
      out["connected"] = true;
      const auto fields = split_fields(std::string_view(line).substr(13));
      if (!fields.empty()) out["access_point"] = std::string(fields[0]);
      continue;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    const std::string label = strip_whitespace(std::string_view(line).substr(0, colon));
    const std::string value = strip_whitespace(std::string_view(line).substr(colon + 1));
    out[label] = value;
    if (label == "freq") {
      if (const auto mhz = parse_leading_double(value)) out["frequency_mhz"] = *mhz;
    } else if (label == "signal") {
      if (const auto dbm = parse_leading_double(value)) out["signal_dbm"] = *dbm;
    } else if (label == "rx bitrate") {
      if (const auto mbps = bitrate_mbps(value)) out["rx_bitrate_mbps"] = *mbps;
    } else if (label == "tx bitrate") {
      if (const auto mbps = bitrate_mbps(value)) out["tx_bitrate_mbps"] = *mbps;
    } else if (label == "RX") {
      add_byte_packet_counts(out, "rx", value);
    } else if (label == "TX") {
      add_byte_packet_counts(out, "tx", value);
    }
  }
  return out;
}

json radio_section(const std::string& interface, const CommandOptions& options) {
  json out = json::object();
  out["device"] = run_command({"iw", "dev", interface, "info"}, options);
  out["link"] = run_command({"iw", "dev", interface, "link"}, options);
  const json& link = out["link"];
  out["link_fields"] = link["available"] == true && link["returncode"] == 0
                           ? parse_iw_link(link["stdout"].get<std::string>())
                           : json::object();
  out["station_dump"] = run_command({"iw", "dev", interface, "station", "dump"}, options);
  out["survey_dump"] = run_command({"iw", "dev", interface, "survey", "dump"}, options);
  out["power_save"] = run_command({"iw", "dev", interface, "get", "power_save"}, options);
  out["regulatory_domain"] = run_command({"iw", "reg", "get"}, options);
  out["driver"] = run_command({"ethtool", "-i", interface}, options);
  out["driver_statistics"] = run_command({"ethtool", "-S", interface}, options);
  out["offload_features"] = run_command({"ethtool", "-k", interface}, options);
  return out;
}

json read_link_fields(const std::string& interface, const CommandOptions& options) {
  if (interface.empty() || !find_executable("iw", options.search_path)) return json::object();
  const json link = run_command({"iw", "dev", interface, "link"}, options);
  if (link["returncode"] != 0) return json::object();
  return parse_iw_link(link["stdout"].get<std::string>());
}

}  // namespace wcomm::bench
