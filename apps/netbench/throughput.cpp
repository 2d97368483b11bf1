// Throughput trial records and their per-size aggregate (V0.1 keys and units).
#include "netbench/throughput.h"

#include <stdexcept>

#include "netbench/stats.h"

namespace wcomm::bench {
namespace {

std::uint64_t total_payload_bytes(const ThroughputTrial& t) {
  return t.payload_bytes_per_message * t.messages_per_direction * t.streams;
}

// Megabits per second of application payload (1 Mbps = 1e6 bit/s), as V0.1 reported.
double goodput_mbps(const ThroughputTrial& t) {
  return t.elapsed_s > 0.0 ? static_cast<double>(total_payload_bytes(t)) * 8.0 / t.elapsed_s / 1e6 : 0.0;
}

double messages_per_s(const ThroughputTrial& t) {
  return t.elapsed_s > 0.0 ? static_cast<double>(t.messages_per_direction * t.streams) / t.elapsed_s : 0.0;
}

}  // namespace

std::uint64_t streams_of(const std::string& direction) { return direction == "bidirectional" ? 2 : 1; }

nlohmann::json trial_to_json(const ThroughputTrial& t) {
  const double aggregate = goodput_mbps(t);
  return {
      {"aggregate_goodput_mbps", aggregate},
      {"elapsed_s", t.elapsed_s},
      {"messages_per_direction", t.messages_per_direction},
      {"messages_per_s", messages_per_s(t)},
      {"payload_bytes_per_message", t.payload_bytes_per_message},
      {"per_direction_goodput_mbps", aggregate / static_cast<double>(t.streams)},
      {"responder_elapsed_s", t.responder_elapsed_s},
      {"streams", t.streams},
      {"total_payload_bytes", total_payload_bytes(t)},
  };
}

nlohmann::json aggregate_trials(const std::vector<ThroughputTrial>& trials) {
  if (trials.empty()) throw std::invalid_argument("aggregate_trials: no trials");
  const ThroughputTrial& first = trials.front();
  nlohmann::json records = nlohmann::json::array();
  std::vector<double> aggregate, per_direction, rate, elapsed;
  for (const auto& t : trials) {
    nlohmann::json record = trial_to_json(t);
    aggregate.push_back(record["aggregate_goodput_mbps"].get<double>());
    per_direction.push_back(record["per_direction_goodput_mbps"].get<double>());
    rate.push_back(record["messages_per_s"].get<double>());
    elapsed.push_back(t.elapsed_s);
    records.push_back(std::move(record));
  }
  return {
      {"aggregate_goodput_mbps", summarize(aggregate)},
      {"elapsed_s", summarize(elapsed)},
      {"messages_per_direction", first.messages_per_direction},
      {"messages_per_s", summarize(rate)},
      {"payload_bytes_per_message", first.payload_bytes_per_message},
      {"per_direction_goodput_mbps", summarize(per_direction)},
      {"streams", first.streams},
      {"total_payload_bytes", total_payload_bytes(first)},
      {"total_payload_bytes_all_trials", total_payload_bytes(first) * trials.size()},
      {"trial_count", trials.size()},
      {"trials", std::move(records)},
  };
}

}  // namespace wcomm::bench
