// Throughput trials and their per-size aggregate, in the V0.1 report's shape
// (throughput.<direction>[i]); goodput counts application payload bytes only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

// One timed phase of `messages_per_direction` messages of `payload_bytes` each.
struct ThroughputTrial {
  std::uint64_t payload_bytes_per_message = 0;
  std::uint64_t messages_per_direction = 0;
  std::uint64_t streams = 1;          // 2 for bidirectional: both directions at once
  double elapsed_s = 0.0;             // initiator: from `ready` to `complete`
  double responder_elapsed_s = 0.0;   // as the responder measured its side of the phase
};

// Streams (directions carrying data) of a phase: 2 for bidirectional, else 1.
std::uint64_t streams_of(const std::string& direction);

// A trial's record: aggregate_goodput_mbps (all streams' payload bits / elapsed / 1e6),
// per_direction_goodput_mbps (aggregate / streams), messages_per_s (all streams), elapsed_s,
// responder_elapsed_s, messages_per_direction, payload_bytes_per_message, streams,
// total_payload_bytes.
nlohmann::json trial_to_json(const ThroughputTrial& trial);

// The per-size entry: the trials, summaries (stats.h) of aggregate_goodput_mbps,
// per_direction_goodput_mbps, messages_per_s and elapsed_s over the trials, and the totals.
// `trials` must all have the same size, count and streams, and not be empty.
nlohmann::json aggregate_trials(const std::vector<ThroughputTrial>& trials);

}  // namespace wcomm::bench
