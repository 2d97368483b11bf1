// The environment snapshot of a benchmark node and the counter deltas between snapshots.
#include "netbench/diagnostics.h"

#include <gnu/libc-version.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "netbench/diagnostics_proc.h"
#include "netbench/diagnostics_radio.h"
#include "netbench/diagnostics_text.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

json file_string(const std::string& path) {
  const auto text = read_text_file(path);
  return text ? json(strip_whitespace(*text)) : json(nullptr);
}

json tcp_settings() {
  return {
      {"congestion_control", file_string("/proc/sys/net/ipv4/tcp_congestion_control")},
      {"available_congestion_control", file_string("/proc/sys/net/ipv4/tcp_available_congestion_control")},
      {"default_qdisc", file_string("/proc/sys/net/core/default_qdisc")},
      {"tcp_mtu_probing", file_string("/proc/sys/net/ipv4/tcp_mtu_probing")},
      {"tcp_rmem", file_string("/proc/sys/net/ipv4/tcp_rmem")},
      {"tcp_wmem", file_string("/proc/sys/net/ipv4/tcp_wmem")},
  };
}

json interface_section(const std::string& interface, const CommandOptions& options) {
  const std::string base = "/sys/class/net/" + interface + "/";
  json mtu = nullptr;
  if (const auto text = read_text_file(base + "mtu")) {
    if (const auto v = parse_unsigned(strip_whitespace(*text))) mtu = *v;
  }
  return {
      {"name", interface},
      {"address", file_string(base + "address")},
      {"mtu", mtu},
      {"operstate", file_string(base + "operstate")},
      {"statistics", read_interface_statistics(interface)},
      {"addresses", run_command({"ip", "-j", "address", "show", "dev", interface}, options)},
  };
}

std::string platform_string(const utsname& uts) {
  // Python's platform.platform() on glibc Linux, which V0.1 recorded.
  return std::string(uts.sysname) + "-" + uts.release + "-" + uts.machine + "-with-glibc" + gnu_get_libc_version();
}

json load_average() {
  double loads[3] = {0, 0, 0};
  if (::getloadavg(loads, 3) != 3) return nullptr;
  return {loads[0], loads[1], loads[2]};
}

}  // namespace

std::string interface_for_peer(const std::string& peer_host, const CommandOptions& options) {
  if (peer_host.empty()) return {};
  const json route = run_command({"ip", "route", "get", peer_host}, options);
  if (route["returncode"] != 0) return {};
  const std::string text = route["stdout"].get<std::string>();  // the fields are views into it
  const auto fields = split_fields(text);
  for (std::size_t i = 0; i + 1 < fields.size(); ++i) {
    if (fields[i] == "dev") return std::string(fields[i + 1]);
  }
  return {};
}

json tcp_sockets(const std::string& peer_host, const CommandOptions& options) {
  return run_command({"ss", "-tinm", "dst", peer_host}, options);
}

json capture_environment(const EnvironmentOptions& options) {
  const CommandOptions& commands = options.commands;
  const std::string interface =
      options.interface.empty() ? interface_for_peer(options.peer_host, commands) : options.interface;
  json env = json::object();
  env["captured_at_unix_s"] = unix_now_s();

  char host[256] = {};
  env["hostname"] = ::gethostname(host, sizeof host - 1) == 0 ? json(std::string(host)) : json(nullptr);
  utsname uts{};
  if (::uname(&uts) == 0) {
    env["machine"] = uts.machine;
    env["platform"] = platform_string(uts);
  } else {
    env["machine"] = nullptr;
    env["platform"] = nullptr;
  }
  env["python"] = nullptr;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  env["cpu_count"] = cpus > 0 ? json(cpus) : json(nullptr);
  env["cpu_details"] = run_command({"lscpu", "-J"}, commands);
  env["load_average"] = load_average();
  const auto meminfo = read_text_file("/proc/meminfo");
  env["memory"] = parse_meminfo(meminfo.value_or(""));

  if (interface.empty()) {
    env["interface"] = nullptr;
    env["qdisc"] = nullptr;
    env["radio"] = nullptr;
  } else {
    env["interface"] = interface_section(interface, commands);
    env["qdisc"] = run_command({"tc", "-s", "qdisc", "show", "dev", interface}, commands);
    env["radio"] = radio_section(interface, commands);
  }
  env["route"] = options.peer_host.empty() ? json(nullptr) : run_command({"ip", "route", "get", options.peer_host}, commands);
  env["tcp"] = tcp_settings();
  env["tcp_sockets"] = options.peer_host.empty() ? json(nullptr) : tcp_sockets(options.peer_host, commands);
  env["clock_sync"] = run_command({"timedatectl", "show", "-p", "NTPSynchronized", "-p", "TimeUSec"}, commands);
  env["power_mode"] = run_command({"nvpmodel", "-q"}, commands);
  env["kernel_network_counters"] = read_kernel_network_counters(interface_irq_names(interface));
  return env;
}

json counter_delta(const json& before, const json& after) {
  if (before.is_null() || after.is_null()) return nullptr;
  if (before.is_number() && after.is_number()) {
    if (before.is_number_float() || after.is_number_float()) return after.get<double>() - before.get<double>();
    // Counters are unsigned in the kernel but a delta may be negative (a counter reset, an
    // interface re-created): subtract as signed.
    return after.get<long long>() - before.get<long long>();
  }
  if (before.is_array() && after.is_array()) {
    json out = json::array();
    const std::size_t n = std::min(before.size(), after.size());
    for (std::size_t i = 0; i < n; ++i) out.push_back(counter_delta(before[i], after[i]));
    return out;
  }
  if (before.is_object() && after.is_object()) {
    json out = json::object();
    for (const auto& [key, value] : after.items()) {
      if (before.contains(key)) out[key] = counter_delta(before[key], value);
    }
    return out;
  }
  if (after.is_string()) return after;
  return nullptr;
}

json kernel_counter_delta(const json& before_counters, const json& after_counters) {
  return counter_delta(before_counters, after_counters);
}

json interface_counter_delta(const json& before_statistics, const json& after_statistics) {
  return counter_delta(before_statistics, after_statistics);
}

void add_environment_section(json& node_section, const json& before, const json& after) {
  node_section["environment_before"] = before;
  node_section["environment_after"] = after;
  auto statistics = [](const json& env) -> json {
    if (!env.is_object() || !env.contains("interface") || !env["interface"].is_object()) return nullptr;
    return env["interface"].value("statistics", json(nullptr));
  };
  auto counters = [](const json& env) -> json {
    if (!env.is_object()) return nullptr;
    return env.value("kernel_network_counters", json(nullptr));
  };
  node_section["interface_counter_delta"] = interface_counter_delta(statistics(before), statistics(after));
  node_section["kernel_counter_delta"] = kernel_counter_delta(counters(before), counters(after));
}

}  // namespace wcomm::bench
