// Fixed report sections and report output.
#include "bench/report.h"

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
      // Placeholders until the diagnostics release (wcomm_section() lists them).
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
      {"version", "0.2.0"},
      {"diagnostics_collected", false},
      {"placeholders",
       {"initiator.environment_before", "initiator.environment_after", "initiator.interface_counter_delta",
        "initiator.kernel_counter_delta", "initiator.link_samples", "initiator.tcp_socket_before_stop",
        "responder.environment_before", "responder.environment_after", "responder.interface_counter_delta",
        "responder.kernel_counter_delta", "responder.link_samples", "responder_environment_at_handshake",
        "ping_to_initiator", "ping_to_responder"}},
      {"note",
       "null placeholders: system, network, radio and ping diagnostics, tensor round trips and latency under "
       "load are not collected by this release"},
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
