// Fixed report sections and report output.
#include "netbench/report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace wcomm::bench {

nlohmann::json semantics_section() {
  return {
      {"bidirectional_goodput", "aggregate counts both directions; per-direction counts one stream"},
      {"goodput", "application payload bytes divided by end-to-end phase time"},
      {"jitter_mean_abs_delta", "mean absolute difference between consecutive samples"},
      {"jitter_p95_abs_delta", "p95 absolute difference between consecutive samples"},
      {"latency", "application-level payload echo round-trip time"},
      {"outlier", "sample above p75 + 1.5 * interquartile range"},
      {"packet_loss",
       "TCP masks link-layer loss; use ping, interface counters, and radio diagnostics for loss and "
       "retransmission evidence"},
  };
}

nlohmann::json node_section(const std::string& node_id, const std::string& interface) {
  return {
      {"node_id", node_id},
      {"interface", interface.empty() ? nlohmann::json(nullptr) : nlohmann::json(interface)},
      // Filled by the node's diagnostics (add_environment_section, LinkSampler, add_process_usage).
      {"environment_before", nullptr},
      {"environment_after", nullptr},
      {"interface_counter_delta", nullptr},
      {"kernel_counter_delta", nullptr},
      {"link_samples", nullptr},
      {"process_observation_duration_s", nullptr},
      {"process_usage_delta", nullptr},
      {"process_usage_rates_per_s", nullptr},
  };
}

nlohmann::json wcomm_section() {
  return {
      {"implementation", "wcomm"},
      {"version", WCOMM_VERSION},
      {"diagnostics_collected", true},
      {"placeholders", nlohmann::json::array()},
      {"note",
       "every V0.1 key is collected; a tool that is missing on a node is recorded as unavailable in its "
       "command result"},
  };
}

void write_report(const nlohmann::json& report, const std::string& path) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write the report to '" + temporary + "': " + std::strerror(errno));
    out << report.dump(2) << '\n';
    if (!out.flush()) throw std::runtime_error("cannot write the report to '" + temporary + "': " + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot move the report to '" + path + "': " + std::strerror(errno));
}

}  // namespace wcomm::bench
