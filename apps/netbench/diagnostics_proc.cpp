// Parsers and readers of /proc and /sys counters for the diagnostics.
#include "netbench/diagnostics_proc.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <filesystem>

#include "netbench/diagnostics_text.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

json per_cpu_counter(const std::vector<unsigned long long>& values) {
  unsigned long long total = 0;
  for (const auto v : values) total += v;
  return {{"per_cpu", values}, {"total", total}};
}

std::optional<unsigned long long> parse_hex(std::string_view field) {
  unsigned long long value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value, 16);
  if (error != std::errc() || end != field.data() + field.size()) return std::nullopt;
  return value;
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// `token` names `name`: it holds `name` with no name character right before or after it.
bool token_names(std::string_view token, std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t at = token.find(name); at != std::string_view::npos; at = token.find(name, at + 1)) {
    const bool left_ok = at == 0 || !is_name_char(token[at - 1]);
    const std::size_t after = at + name.size();
    const bool right_ok = after == token.size() || !is_name_char(token[after]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

std::string basename_of_link(const std::string& path) {
  char target[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  if (n <= 0) return {};
  const std::string_view link(target, static_cast<std::size_t>(n));
  const std::size_t slash = link.rfind('/');
  return std::string(slash == std::string_view::npos ? link : link.substr(slash + 1));
}

}  // namespace

bool network_interface_exists(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != ".." &&
         std::filesystem::exists(std::filesystem::path("/sys/class/net") / name);
}

json parse_softirqs(std::string_view text) {
  json out = json::object();
  for (const std::string_view line : split_lines(text)) {
    const auto fields = split_fields(line);
    if (fields.empty()) continue;
    const std::string_view label = fields[0];
    if (label != "NET_RX:" && label != "NET_TX:") continue;
    std::vector<unsigned long long> values;
    for (std::size_t i = 1; i < fields.size(); ++i) values.push_back(parse_unsigned(fields[i]).value_or(0));
    out[std::string(label.substr(0, label.size() - 1))] = per_cpu_counter(values);
  }
  return out;
}

json parse_softnet_stat(std::string_view text) {
  // Column positions of net/core/net-procfs.c's softnet_seq_show().
  static constexpr std::array<std::pair<const char*, std::size_t>, 6> kColumns{{
      {"processed", 0},
      {"dropped", 1},
      {"time_squeeze", 2},
      {"cpu_collision", 8},
      {"received_rps", 9},
      {"flow_limit_count", 10},
  }};
  std::array<std::vector<unsigned long long>, kColumns.size()> values;
  for (const std::string_view line : split_lines(text)) {
    const auto fields = split_fields(line);
    if (fields.empty()) continue;
    for (std::size_t c = 0; c < kColumns.size(); ++c) {
      const std::size_t column = kColumns[c].second;
      values[c].push_back(column < fields.size() ? parse_hex(fields[column]).value_or(0) : 0);
    }
  }
  json out = json::object();
  for (std::size_t c = 0; c < kColumns.size(); ++c) out[kColumns[c].first] = per_cpu_counter(values[c]);
  return out;
}

std::optional<unsigned long long> parse_context_switches(std::string_view proc_stat) {
  for (const std::string_view line : split_lines(proc_stat)) {
    if (!line.starts_with("ctxt ")) continue;
    const auto fields = split_fields(line);
    if (fields.size() >= 2) return parse_unsigned(fields[1]);
  }
  return std::nullopt;
}

json parse_interface_interrupts(std::string_view text, const std::vector<std::string>& names) {
  const auto lines = split_lines(text);
  if (lines.empty() || names.empty()) return nullptr;
  const std::size_t cpu_count = split_fields(lines[0]).size();  // header: CPU0 CPU1 ...
  json irqs = json::object();
  std::vector<unsigned long long> sum(cpu_count, 0);
  unsigned long long total = 0;
  for (std::size_t l = 1; l < lines.size(); ++l) {
    const auto fields = split_fields(lines[l]);
    if (fields.size() < 1 + cpu_count || !fields[0].ends_with(':')) continue;
    const std::string_view irq = fields[0].substr(0, fields[0].size() - 1);
    // Only numbered IRQs belong to a device; NMI, LOC, RES ... are the CPUs' own.
    if (!parse_unsigned(irq)) continue;
    std::vector<unsigned long long> counts;
    bool numeric = true;
    for (std::size_t c = 0; c < cpu_count; ++c) {
      const auto v = parse_unsigned(fields[1 + c]);
      if (!v) numeric = false;
      counts.push_back(v.value_or(0));
    }
    if (!numeric) continue;
    bool matches = false;
    std::string description;
    for (std::size_t f = 1 + cpu_count; f < fields.size(); ++f) {
      if (!description.empty()) description += ' ';
      description += fields[f];
      std::string_view token = fields[f];
      // Shared IRQs list their actions comma-separated ("ehci_hcd:usb1, i801_smbus").
      for (const std::string& name : names) matches = matches || token_names(token, name);
    }
    if (!matches) continue;
    json entry = per_cpu_counter(counts);
    entry["description"] = description;
    irqs[std::string(irq)] = std::move(entry);
    for (std::size_t c = 0; c < cpu_count; ++c) sum[c] += counts[c];
    for (const auto v : counts) total += v;
  }
  if (irqs.empty()) return nullptr;
  return {{"irqs", std::move(irqs)}, {"per_cpu", sum}, {"total", total}};
}

json parse_meminfo(std::string_view text) {
  json out = {{"MemTotal_kib", nullptr}, {"MemAvailable_kib", nullptr}, {"SwapTotal_kib", nullptr}, {"SwapFree_kib", nullptr}};
  for (const std::string_view line : split_lines(text)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string key = std::string(line.substr(0, colon)) + "_kib";
    if (!out.contains(key)) continue;
    const auto fields = split_fields(line.substr(colon + 1));  // "24683652 kB"
    if (!fields.empty()) {
      if (const auto v = parse_unsigned(fields[0])) out[key] = *v;
    }
  }
  return out;
}

std::vector<std::string> interface_irq_names(const std::string& interface) {
  if (interface.empty()) return {};
  std::vector<std::string> names{interface};
  const std::string base = "/sys/class/net/" + interface + "/device";
  for (std::string name : {basename_of_link(base), basename_of_link(base + "/driver")}) {
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  return names;
}

json read_interface_statistics(const std::string& interface) {
  static constexpr std::array<const char*, 8> kCounters{"rx_bytes", "rx_dropped", "rx_errors", "rx_packets",
                                                       "tx_bytes", "tx_dropped", "tx_errors", "tx_packets"};
  json out = json::object();
  const std::string base = "/sys/class/net/" + interface + "/statistics/";
  for (const char* counter : kCounters) {
    const auto text = interface.empty() ? std::nullopt : read_text_file(base + counter);
    const auto value = text ? parse_unsigned(strip_whitespace(*text)) : std::nullopt;
    out[counter] = value ? json(*value) : json(nullptr);
  }
  return out;
}

json read_kernel_network_counters(const std::vector<std::string>& irq_names) {
  json out = json::object();
  const auto stat = read_text_file("/proc/stat");
  const auto ctxt = stat ? parse_context_switches(*stat) : std::nullopt;
  out["context_switches"] = ctxt ? json(*ctxt) : json(nullptr);
  if (irq_names.empty()) {
    out["interface_irq"] = nullptr;
  } else {
    const auto interrupts = read_text_file("/proc/interrupts");
    out["interface_irq"] = interrupts ? parse_interface_interrupts(*interrupts, irq_names) : json(nullptr);
  }
  const auto softirqs = read_text_file("/proc/softirqs");
  out["softirqs"] = softirqs ? parse_softirqs(*softirqs) : json(nullptr);
  const auto softnet = read_text_file("/proc/net/softnet_stat");
  out["softnet"] = softnet ? parse_softnet_stat(*softnet) : json(nullptr);
  return out;
}

}  // namespace wcomm::bench
