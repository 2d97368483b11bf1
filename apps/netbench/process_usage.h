// The process's own resource usage (getrusage) over a benchmark run, in the V0.1 report's
// process_usage_delta / process_usage_rates_per_s shape.
#pragma once

#include <chrono>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

struct ProcessUsage {
  double user_cpu_s = 0.0;
  double system_cpu_s = 0.0;
  long max_rss_kib = 0;  // the process's peak resident set so far (not a delta)
  long voluntary_context_switches = 0;
  long involuntary_context_switches = 0;
  std::chrono::steady_clock::time_point taken_at;
};

ProcessUsage sample_process_usage();

// Adds process_observation_duration_s, process_usage_delta and process_usage_rates_per_s
// (per second of observation) for the interval [before, after] to `section`.
void add_process_usage(nlohmann::json& section, const ProcessUsage& before, const ProcessUsage& after);

}  // namespace wcomm::bench
