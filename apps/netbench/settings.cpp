// Benchmark settings: validation, the throughput message count, and the report section.
#include "netbench/settings.h"

#include <algorithm>
#include <stdexcept>

namespace wcomm::bench {
namespace {

bool is_direction(const std::string& d) { return d == "upload" || d == "download" || d == "bidirectional"; }

}  // namespace

void BenchSettings::validate() const {
  for (const auto& d : directions)
    if (!is_direction(d))
      throw std::invalid_argument("directions: '" + d + "' is not one of upload, download, bidirectional");
  for (const auto& d : load_directions)
    if (!is_direction(d))
      throw std::invalid_argument("load_directions: '" + d + "' is not one of upload, download, bidirectional");
  if (latency_rounds == 0 && !latency_sizes.empty())
    throw std::invalid_argument("latency_rounds: must be at least 1 when latency sizes are given");
  if (throughput_trials == 0 && !throughput_sizes.empty())
    throw std::invalid_argument("throughput_trials: must be at least 1 when throughput sizes are given");
  if (min_throughput_messages == 0)
    throw std::invalid_argument("min_throughput_messages: must be at least 1");
  if (max_throughput_messages < min_throughput_messages)
    throw std::invalid_argument("max_throughput_messages: must be at least min_throughput_messages (" +
                                std::to_string(min_throughput_messages) + ")");
  if (!(operation_timeout > 0.0)) throw std::invalid_argument("operation_timeout: must be a positive number of seconds");
  for (std::uint64_t size : tensor_sizes)
    if (size % 4 != 0)
      throw std::invalid_argument("tensor_sizes: " + std::to_string(size) +
                                  " is not a multiple of 4 (the tensors are float32)");
  if (tensor_rounds == 0 && !tensor_sizes.empty())
    throw std::invalid_argument("tensor_rounds: must be at least 1 when tensor sizes are given");
  for (double f : load_fractions)
    if (!(f > 0.0) || f > 4.0)
      throw std::invalid_argument("load_fractions: " + std::to_string(f) + " is not in (0, 4] (a fraction of capacity)");
  if (!load_fractions.empty()) {
    if (load_concurrencies.empty() || load_directions.empty())
      throw std::invalid_argument("load_concurrencies / load_directions: must not be empty when load fractions are given");
    for (std::uint64_t n : load_concurrencies)
      if (n == 0 || n > 64) throw std::invalid_argument("load_concurrencies: each must be in 1..64");
    if (!(load_duration > 0.0)) throw std::invalid_argument("load_duration: must be a positive number of seconds");
    if (!(load_probe_interval > 0.0))
      throw std::invalid_argument("load_probe_interval: must be a positive number of seconds");
    if (load_backgrounds.empty()) throw std::invalid_argument("load_backgrounds: must not be empty");
    for (const auto& b : load_backgrounds)
      if (b != "tcp" && b != "tensor")
        throw std::invalid_argument("load_backgrounds: '" + b + "' is not one of tcp, tensor");
    if (std::find(load_backgrounds.begin(), load_backgrounds.end(), "tensor") != load_backgrounds.end()) {
      if (load_tensor_bytes < 1024 || load_tensor_bytes > (1ull << 30))
        throw std::invalid_argument("load_tensor_bytes: must be between 1024 and 2^30");
      for (const auto& d : load_directions)
        if (d != "upload")
          throw std::invalid_argument("load_directions: the tensor background loads upload only (the initiator "
                                      "sends), got '" + d + "'");
    }
  }
}

std::uint64_t throughput_message_count(const BenchSettings& settings, std::uint64_t payload_bytes) {
  // Rounded up, as V0.1 counted (math.ceil), so messages_per_direction means the same.
  const std::uint64_t wanted = payload_bytes == 0 ? settings.max_throughput_messages
                                                  : (settings.throughput_target_bytes + payload_bytes - 1) / payload_bytes;
  return std::clamp(wanted, settings.min_throughput_messages, settings.max_throughput_messages);
}

nlohmann::json settings_to_json(const BenchSettings& s) {
  nlohmann::json out = {
      {"directions", s.directions},
      {"latency_rounds", s.latency_rounds},
      {"latency_sizes", s.latency_sizes},
      {"load_concurrencies", s.load_concurrencies},
      {"load_directions", s.load_directions},
      {"load_duration", s.load_duration},
      {"load_fractions", s.load_fractions},
      {"load_probe_interval", s.load_probe_interval},
      {"load_probe_size", s.load_probe_size},
      {"max_throughput_messages", s.max_throughput_messages},
      {"min_throughput_messages", s.min_throughput_messages},
      {"operation_timeout", s.operation_timeout},
      {"ping_count", s.ping_count},
      {"random_seed", s.random_seed},
      {"sample_interval", s.sample_interval},
      {"tensor_rounds", s.tensor_rounds},
      {"tensor_sizes", s.tensor_sizes},
      {"throughput_sizes", s.throughput_sizes},
      {"throughput_target_bytes", s.throughput_target_bytes},
      {"throughput_trials", s.throughput_trials},
      {"warmup_rounds", s.warmup_rounds},
  };
  // wcomm's additions, only when used (a V0.1 report's settings stay as they were).
  if (s.load_backgrounds != std::vector<std::string>{"tcp"}) {
    out["load_backgrounds"] = s.load_backgrounds;
    out["load_tensor_bytes"] = s.load_tensor_bytes;
    out["comm_chunk_bytes"] = s.comm_chunk_bytes;
  }
  return out;
}

}  // namespace wcomm::bench
