// Unit tests of the benchmark statistics and report pieces: known distributions, and the V0.1
// reference report's own samples and summaries (tests/data/reference-reports).
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

// The bench layer's headers live under src/ (not a public include directory).
#include "netbench/json_value.h"
#include "netbench/settings.h"
#include "netbench/stats.h"
#include "netbench/throughput.h"
#include "reference_report.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;
using testing::keys_of;
using testing::reference_report;

// Every numeric field of `expected` matches `actual` within `relative` (nulls must match).
void expect_close(const json& actual, const json& expected, double relative, const std::string& where) {
  ASSERT_EQ(keys_of(actual), keys_of(expected)) << where;
  for (const auto& [key, want] : expected.items()) {
    const json& got = actual.at(key);
    if (want.is_null()) {
      EXPECT_TRUE(got.is_null()) << where << "." << key;
      continue;
    }
    const double w = want.get<double>();
    const double g = got.get<double>();
    EXPECT_LE(std::fabs(g - w), relative * std::fabs(w)) << where << "." << key << ": " << g << " vs " << w;
  }
}

const std::set<std::string> kSummaryKeys = {
    "p01", "p05", "p25", "p50", "p75", "p90", "p95", "p99", "p99_9", "min", "max", "mean", "stddev", "range",
    "median_absolute_deviation", "coefficient_of_variation", "jitter_mean_abs_delta", "jitter_p95_abs_delta",
    "jitter_rms_delta", "outlier_count", "outlier_fraction", "outlier_threshold", "percentile_resolution",
    "sample_count"};

TEST(BenchStats, PercentileIsNumpyLinear) {
  const std::vector<double> x = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 100), 4.0);
  const std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(percentile_sorted(one, 99.9), 7.0);
}

TEST(BenchStats, OneToHundred) {
  std::vector<double> x;
  for (int i = 1; i <= 100; ++i) x.push_back(i);
  const json s = summarize(x);
  EXPECT_EQ(keys_of(s), kSummaryKeys);
  EXPECT_EQ(s["sample_count"], 100);
  EXPECT_DOUBLE_EQ(s["min"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(s["max"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(s["range"].get<double>(), 99);
  EXPECT_DOUBLE_EQ(s["mean"].get<double>(), 50.5);
  EXPECT_DOUBLE_EQ(s["p50"].get<double>(), 50.5);
  EXPECT_DOUBLE_EQ(s["p01"].get<double>(), 1.99);
  EXPECT_DOUBLE_EQ(s["p25"].get<double>(), 25.75);
  EXPECT_DOUBLE_EQ(s["p75"].get<double>(), 75.25);
  EXPECT_DOUBLE_EQ(s["p99_9"].get<double>(), 99.901);
  // Population standard deviation of 1..n: sqrt((n^2 - 1) / 12).
  EXPECT_DOUBLE_EQ(s["stddev"].get<double>(), std::sqrt(9999.0 / 12.0));
  EXPECT_DOUBLE_EQ(s["coefficient_of_variation"].get<double>(), std::sqrt(9999.0 / 12.0) / 50.5);
  // |x - 50.5| is 0.5 .. 49.5, each twice: its median is 25.
  EXPECT_DOUBLE_EQ(s["median_absolute_deviation"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(s["jitter_mean_abs_delta"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["jitter_p95_abs_delta"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["jitter_rms_delta"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["outlier_threshold"].get<double>(), 75.25 + 1.5 * 49.5);
  EXPECT_EQ(s["outlier_count"], 0);
  EXPECT_DOUBLE_EQ(s["outlier_fraction"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s["percentile_resolution"].get<double>(), 0.01);
}

TEST(BenchStats, JitterFollowsSampleOrder) {
  // Same values, different order: percentiles agree, jitter does not.
  const json smooth = summarize(std::vector<double>{1, 2, 3, 4});
  const json zigzag = summarize(std::vector<double>{1, 4, 2, 3});
  EXPECT_EQ(smooth["p50"], zigzag["p50"]);
  EXPECT_DOUBLE_EQ(smooth["jitter_mean_abs_delta"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(zigzag["jitter_mean_abs_delta"].get<double>(), 2.0);  // 3, 2, 1
  EXPECT_DOUBLE_EQ(zigzag["jitter_rms_delta"].get<double>(), std::sqrt(14.0 / 3.0));
}

TEST(BenchStats, OutliersAboveTukeyFence) {
  const json s = summarize(std::vector<double>{1, 1, 1, 1, 100});
  EXPECT_DOUBLE_EQ(s["outlier_threshold"].get<double>(), 1.0);
  EXPECT_EQ(s["outlier_count"], 1);
  EXPECT_DOUBLE_EQ(s["outlier_fraction"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(s["median_absolute_deviation"].get<double>(), 0.0);
}

TEST(BenchStats, ConstantSeries) {
  const json s = summarize(std::vector<double>(10, 0.25));
  EXPECT_DOUBLE_EQ(s["stddev"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s["coefficient_of_variation"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s["jitter_rms_delta"].get<double>(), 0.0);
  EXPECT_EQ(s["outlier_count"], 0);
}

TEST(BenchStats, DegenerateInputsGiveNulls) {
  const json none = summarize(std::vector<double>{});
  EXPECT_EQ(keys_of(none), kSummaryKeys);
  EXPECT_EQ(none["sample_count"], 0);
  EXPECT_TRUE(none["p50"].is_null());
  EXPECT_TRUE(none["mean"].is_null());

  const json one = summarize(std::vector<double>{3.5});
  EXPECT_EQ(keys_of(one), kSummaryKeys);
  EXPECT_DOUBLE_EQ(one["p99_9"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(one["stddev"].get<double>(), 0.0);
  EXPECT_TRUE(one["jitter_mean_abs_delta"].is_null());
  EXPECT_DOUBLE_EQ(one["percentile_resolution"].get<double>(), 1.0);

  const json zero_mean = summarize(std::vector<double>{-1, 1});
  EXPECT_TRUE(zero_mean["coefficient_of_variation"].is_null());
}

TEST(BenchStats, ReproducesReferenceLatencySummaries) {
  const json& latency = reference_report()["latency"];
  ASSERT_FALSE(latency.empty());
  for (const auto& entry : latency) {
    const auto samples = entry["samples_ms"].get<std::vector<double>>();
    const json mine = summarize(samples);
    EXPECT_EQ(keys_of(mine), kSummaryKeys);
    EXPECT_EQ(keys_of(entry["summary_ms"]), kSummaryKeys);
    expect_close(mine, entry["summary_ms"], 1e-9, "latency[" + entry["payload_bytes"].dump() + "]");
    // Beyond the tolerance: percentiles, mean and jitter are bit-exact (only V0.1's exact
    // rational pstdev may differ in the last bit).
    for (const char* key : {"p01", "p05", "p25", "p50", "p75", "p90", "p95", "p99", "p99_9", "mean",
                            "median_absolute_deviation", "jitter_mean_abs_delta", "jitter_p95_abs_delta",
                            "outlier_threshold"})
      EXPECT_EQ(mine[key].get<double>(), entry["summary_ms"][key].get<double>()) << key;
  }
}

TEST(BenchStats, ReproducesReferenceThroughputEntries) {
  for (const auto& [direction, entries] : reference_report()["throughput"].items()) {
    for (const auto& entry : entries) {
      const std::string where = direction + "[" + entry["payload_bytes_per_message"].dump() + "]";
      // Rebuild every trial from what was measured (elapsed times), then the aggregate.
      std::vector<ThroughputTrial> trials;
      for (const auto& t : entry["trials"]) {
        ThroughputTrial trial;
        trial.payload_bytes_per_message = t["payload_bytes_per_message"];
        trial.messages_per_direction = t["messages_per_direction"];
        trial.streams = t["streams"];
        trial.elapsed_s = t["elapsed_s"];
        trial.responder_elapsed_s = t["responder_elapsed_s"];
        EXPECT_EQ(trial.streams, streams_of(direction)) << where;
        expect_close(trial_to_json(trial), t, 1e-12, where + ".trial");
        trials.push_back(trial);
      }
      const json mine = aggregate_trials(trials);
      EXPECT_EQ(keys_of(mine), keys_of(entry)) << where;
      for (const char* key : {"messages_per_direction", "payload_bytes_per_message", "streams", "total_payload_bytes",
                              "total_payload_bytes_all_trials", "trial_count"})
        EXPECT_EQ(mine[key], entry[key]) << where << "." << key;
      for (const char* key : {"aggregate_goodput_mbps", "per_direction_goodput_mbps", "messages_per_s", "elapsed_s"})
        expect_close(mine[key], entry[key], 1e-9, where + "." + key);
    }
  }
}

TEST(BenchSettings, DefaultsAreTheReferenceRunsSettings) {
  EXPECT_EQ(settings_to_json(BenchSettings{}), reference_report()["settings"]);
}

TEST(BenchSettings, ThroughputMessageCount) {
  BenchSettings s;  // 16 MiB target, 4 .. 4096 messages
  EXPECT_EQ(throughput_message_count(s, 65536), 256u);
  EXPECT_EQ(throughput_message_count(s, 1 << 20), 16u);
  EXPECT_EQ(throughput_message_count(s, 64 << 20), 4u);
  EXPECT_EQ(throughput_message_count(s, 1000), 4096u);
  EXPECT_EQ(throughput_message_count(s, 0), 4096u);
  s.throughput_target_bytes = 3 << 20;
  EXPECT_EQ(throughput_message_count(s, 1 << 20), 4u);
  EXPECT_EQ(throughput_message_count(s, 100000), 32u);  // rounded up, as V0.1's math.ceil
}

TEST(BenchSettings, RefusesWhatCannotRun) {
  BenchSettings s;
  EXPECT_NO_THROW(s.validate());
  s.tensor_sizes = {4096};
  EXPECT_NO_THROW(s.validate());
  s.tensor_sizes = {4098};  // not whole float32 elements
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = {};
  s.load_fractions = {0.5};
  EXPECT_NO_THROW(s.validate());
  s.load_concurrencies = {0};
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = {};
  s.directions = {"sideways"};
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = {};
  s.max_throughput_messages = 2;
  EXPECT_THROW(s.validate(), std::invalid_argument);
}

TEST(BenchJsonValue, RoundTrip) {
  const json report = {{"node_id", "node-b"},
                       {"interface", nullptr},
                       {"process_usage_delta", {{"max_rss_kib", 51320}, {"user_cpu_s", 0.25}}},
                       {"list", {1, -2, 3.5, "x", true}},
                       {"big", 18446744073709551615ull}};
  const Value value = json_to_value(report);
  ASSERT_TRUE(value.is<Dict>());
  EXPECT_EQ(value_to_json(value), report);
}

}  // namespace
}  // namespace wcomm::bench
