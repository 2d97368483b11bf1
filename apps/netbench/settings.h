// What a benchmark run measures: the V0.1 initiator's settings, with V0.1's names, defaults
// and meaning (they are recorded verbatim in the report's "settings" section).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

struct BenchSettings {
  std::vector<std::string> directions{"upload", "download", "bidirectional"};
  std::vector<std::uint64_t> latency_sizes{0, 64, 1024};
  std::uint64_t latency_rounds = 200;
  std::uint64_t warmup_rounds = 10;  // unrecorded pings before each latency size
  std::vector<std::uint64_t> throughput_sizes{65536, 1048576};
  std::uint64_t throughput_target_bytes = 16ull << 20;
  std::uint64_t throughput_trials = 3;
  std::uint64_t min_throughput_messages = 4;
  std::uint64_t max_throughput_messages = 4096;
  double operation_timeout = 120.0;  // seconds, every control exchange and bulk phase
  std::uint64_t ping_count = 3;      // ICMP pings each way in the diagnostics
  std::uint64_t random_seed = 0;
  double sample_interval = 1.0;      // link sampling period of the diagnostics, s
  // Tensor round trips (float32, sizes in bytes) and latency under load; nothing runs when
  // the sizes / fractions are empty.
  std::vector<std::uint64_t> tensor_sizes{};
  std::uint64_t tensor_rounds = 10;
  std::vector<double> load_fractions{};
  std::vector<std::string> load_directions{"upload", "download", "bidirectional"};
  std::vector<std::uint64_t> load_concurrencies{1, 4};
  double load_duration = 10.0;
  double load_probe_interval = 0.05;
  std::uint64_t load_probe_size = 64;
  // What loads the link (wcomm): "tcp" (V0.1: plain TCP streams to the load server beside
  // the Comm) and/or "tensor" (tensors of load_tensor_bytes over the foreground Comm
  // connection itself, upload only, a wcomm responder needed: head-of-line blocking shows).
  std::vector<std::string> load_backgrounds{"tcp"};
  std::uint64_t load_tensor_bytes = 64ull << 20;
  // Recorded with the tensor scenarios: the initiator's CommConfig::chunk_bytes.
  std::uint64_t comm_chunk_bytes = 0;

  // Throws std::invalid_argument naming the first setting that cannot be run.
  void validate() const;
};

// Messages per direction of one throughput trial: target_bytes / size (rounded up, as V0.1), clamped
// to [min_throughput_messages, max_throughput_messages]; a size of 0 sends the maximum.
std::uint64_t throughput_message_count(const BenchSettings& settings, std::uint64_t payload_bytes);

// The report's "settings" section (V0.1's keys, sorted as V0.1 wrote them).
nlohmann::json settings_to_json(const BenchSettings& settings);

}  // namespace wcomm::bench
