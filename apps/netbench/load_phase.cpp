// Latency under load: scenarios, background load, randomized foreground probes.
#include "netbench/load_phase.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "netbench/clock.h"
#include "netbench/load_client.h"
#include "netbench/phase_progress.h"
#include "netbench/stats.h"
#include "netbench/tensor_load.h"

namespace wcomm::bench {
namespace {

double best_median(const nlohmann::json& throughput, const std::string& direction) {
  double best = 0.0;
  if (!throughput.is_object() || !throughput.contains(direction)) return best;
  for (const auto& entry : throughput[direction]) {
    const auto& p50 = entry["aggregate_goodput_mbps"]["p50"];
    if (p50.is_number()) best = std::max(best, p50.get<double>());
  }
  return best;
}

nlohmann::json scenario(const BenchSettings& s, const LoadPhaseTarget& target, const std::string& background,
                        const std::string& direction, std::uint64_t streams, double fraction, double capacity,
                        const std::function<double()>& probe, std::mt19937_64& random, ControlChannel* control) {
  const double target_mbps = fraction * capacity;
  const double directions = direction == "bidirectional" ? 2.0 : 1.0;
  const double per_stream = target_mbps / directions / static_cast<double>(streams);
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(s.operation_timeout * 1000));
  std::optional<LoadClient> tcp_load;
  std::optional<TensorLoad> tensor_load;
  if (background == "tensor") {
    if (!control) throw std::invalid_argument("the tensor background needs the foreground Comm");
    tensor_load.emplace(*control, s.load_tensor_bytes, target_mbps, s.load_duration);
    tensor_load->go();
  } else {
    tcp_load.emplace(target.host, target.port, direction, streams, per_stream, s.load_duration, timeout);
    tcp_load->go();
  }

  std::exponential_distribution<double> spacing(1.0 / s.load_probe_interval);
  std::vector<double> samples, from_schedule;
  const auto start = BenchClock::now();
  auto next = start;
  for (;;) {
    next += std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(spacing(random)));
    if (seconds_between(start, next) >= s.load_duration) break;
    std::this_thread::sleep_until(next);
    samples.push_back(probe());
    // The probe's RTT counted from when it was due: a probe held up behind a long stall (a
    // whole tensor in front of it) makes the ones due meanwhile late too, which the
    // closed-loop RTTs alone do not show (coordinated omission).
    from_schedule.push_back(std::chrono::duration<double, std::milli>(BenchClock::now() - next).count());
  }
  const LoadResult result = tensor_load ? tensor_load->wait() : tcp_load->wait();
  // The tensor background's last tensors finish after the window: its rate is over its elapsed time.
  const double send_window = tensor_load ? result.elapsed_s : s.load_duration;
  const double delivered = (static_cast<double>(result.bytes_sent) * 8.0 / send_window +
                            (result.elapsed_s > 0 ? static_cast<double>(result.bytes_received) * 8.0 / result.elapsed_s
                                                  : 0.0)) /
                           1e6;
  // V0.1's measure of the load: every byte moved by the background streams (sent by this side
  // for upload, received for download) over the time from GO until the last stream ended.
  const std::uint64_t transferred = result.bytes_sent + result.bytes_received;
  const double goodput = result.elapsed_s > 0 ? static_cast<double>(transferred) * 8.0 / result.elapsed_s / 1e6 : 0.0;
  nlohmann::json rtt = summarize(samples);
  nlohmann::json out = {// wcomm's keys
          {"background", background},
          {"direction", direction},
          {"streams", streams},
          {"target_fraction", fraction},
          {"target_mbps", target_mbps},
          {"delivered_mbps", delivered},
          {"capacity_mbps", capacity},
          {"duration_s", s.load_duration},
          {"elapsed_s", result.elapsed_s},
          {"probe_interval_s", s.load_probe_interval},
          {"probe_payload_bytes", s.load_probe_size},
          {"background_bytes_sent", result.bytes_sent},
          {"background_bytes_received", result.bytes_received},
          {"rtt_ms", rtt},
          {"samples_ms", samples},
          // V0.1's keys, with V0.1's meaning (direction, probe_interval_s and
          // probe_payload_bytes above are shared)
          {"concurrency_per_direction", streams},
          {"capacity_reference_mbps", capacity},
          {"load_fraction", fraction},
          {"probe_summary_ms", std::move(rtt)},
          {"probe_samples_ms", samples},
          {"background_load",
           {{"direction", direction},
            {"streams", result.connections},
            {"target_mbps", target_mbps},
            {"elapsed_s", result.elapsed_s},
            {"transferred_bytes", transferred},
            {"goodput_mbps", goodput}}},
          {"delivered_load_fraction", capacity > 0 ? goodput / capacity : 0.0}};
  out["rtt_from_schedule_ms"] = summarize(from_schedule);
  if (tensor_load) {
    out["tensor_bytes"] = s.load_tensor_bytes;
    out["chunk_bytes"] = s.comm_chunk_bytes;
  }
  return out;
}

}  // namespace

double measured_capacity_mbps(const nlohmann::json& throughput, const std::string& direction) {
  double capacity = best_median(throughput, direction);
  if (capacity > 0.0) return capacity;
  if (direction == "bidirectional") return 2.0 * std::max(best_median(throughput, "upload"), best_median(throughput, "download"));
  capacity = std::max(best_median(throughput, "upload"), best_median(throughput, "download"));
  return capacity > 0.0 ? capacity : best_median(throughput, "bidirectional") / 2.0;
}

nlohmann::json run_load_phase(const BenchSettings& s, const nlohmann::json& throughput, const LoadPhaseTarget& target,
                              const std::function<double()>& probe, const ProgressSink& progress,
                              ControlChannel* control) {
  std::mt19937_64 random(s.random_seed);
  nlohmann::json scenarios = nlohmann::json::array();
  // The tensor background is one stream (the Comm connection): concurrencies do not apply.
  std::size_t count = 0;
  for (const auto& background : s.load_backgrounds)
    count += s.load_directions.size() * (background == "tensor" ? 1 : s.load_concurrencies.size()) *
             s.load_fractions.size();
  PhaseProgress steps("latency under load", count);
  for (const std::string& background : s.load_backgrounds)
  for (const std::string& direction : s.load_directions) {
    const double capacity = measured_capacity_mbps(throughput, direction);
    if (!(capacity > 0.0))
      throw std::invalid_argument("latency under load: no goodput was measured to take fractions of (give "
                                  "--throughput-sizes)");
    const std::vector<std::uint64_t> one{1};
    for (std::uint64_t streams : background == "tensor" ? one : s.load_concurrencies) {
      for (double fraction : s.load_fractions) {
        scenarios.push_back(
            scenario(s, target, background, direction, streams, fraction, capacity, probe, random, control));
        if (progress) {
          const auto& last = scenarios.back();
          char detail[200];
          std::snprintf(detail, sizeof detail,
                        "%s %s x%llu at %.2f: target %.1f Mbps, delivered %.1f Mbps, p50 %.3f ms, p99 %.3f ms",
                        background.c_str(), direction.c_str(), static_cast<unsigned long long>(streams), fraction,
                        last["target_mbps"].get<double>(), last["delivered_mbps"].get<double>(),
                        last["rtt_ms"]["p50"].is_number() ? last["rtt_ms"]["p50"].get<double>() : 0.0,
                        last["rtt_ms"]["p99"].is_number() ? last["rtt_ms"]["p99"].get<double>() : 0.0);
          progress(steps.line(scenarios.size(), detail));
        }
      }
    }
  }
  return scenarios;
}

}  // namespace wcomm::bench
