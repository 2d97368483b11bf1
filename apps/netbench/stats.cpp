// Summary statistics of benchmark samples, reproducing the V0.1 report's numbers: V0.1 computed
// percentiles as x[lo]*(1-t) + x[hi]*t at rank fraction*(n-1), means with math.fsum, and the
// population standard deviation (statistics.pstdev). The reference report's summaries are
// reproduced to the last bit or two (tests/unit/bench_stats_test.cpp checks them).
#include "netbench/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace wcomm::bench {
namespace {

// Exactly rounded sum of doubles (Shewchuk's partials, as CPython's math.fsum), so that the
// mean of a series matches V0.1's statistics.fmean bit for bit instead of drifting with the
// order of the additions. Series here are at most a few thousand samples: O(n * partials).
double exact_sum(std::span<const double> values) {
  std::vector<double> partials;
  for (double x : values) {
    std::size_t i = 0;
    for (double y : partials) {
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y;
      const double lo = y - (hi - x);
      if (lo != 0.0) partials[i++] = lo;
      x = hi;
    }
    partials.resize(i);
    partials.push_back(x);
  }
  if (partials.empty()) return 0.0;
  // Add the partials from the largest down; stop at the first inexact step and correct the
  // final rounding the way CPython does (round-half-even across the remaining partials).
  std::size_t n = partials.size();
  double hi = partials[--n];
  double lo = 0.0;
  while (n > 0) {
    const double x = hi;
    const double y = partials[--n];
    hi = x + y;
    const double yr = hi - x;
    lo = y - yr;
    if (lo != 0.0) break;
  }
  if (n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0))) {
    const double y = lo * 2.0;
    const double x = hi + y;
    const double yr = x - hi;
    if (y == yr) hi = x;
  }
  return hi;
}

double exact_mean(std::span<const double> values) {
  return exact_sum(values) / static_cast<double>(values.size());
}

// V0.1's percentile fractions, by summary key. The fraction (not q/100) is what V0.1
// multiplied by n-1, and the last bit of the result depends on it.
struct PercentileKey {
  const char* key;
  double fraction;
};
constexpr PercentileKey kPercentiles[] = {
    {"p01", 0.01}, {"p05", 0.05}, {"p25", 0.25}, {"p50", 0.5},    {"p75", 0.75},
    {"p90", 0.9},  {"p95", 0.95}, {"p99", 0.99}, {"p99_9", 0.999},
};

double fraction_of_sorted(std::span<const double> sorted, double fraction) {
  const double rank = fraction * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double t = rank - static_cast<double>(lo);
  return sorted[lo] * (1.0 - t) + sorted[hi] * t;
}

std::vector<double> sorted_copy(std::span<const double> values) {
  std::vector<double> out(values.begin(), values.end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

double percentile_sorted(std::span<const double> sorted, double q) {
  return fraction_of_sorted(sorted, q / 100.0);
}

nlohmann::json summarize(std::span<const double> samples) {
  using nlohmann::json;
  json out = json::object();
  const std::size_t n = samples.size();
  out["sample_count"] = n;
  out["outlier_count"] = 0;
  if (n == 0) {
    for (const auto& p : kPercentiles) out[p.key] = nullptr;
    for (const char* key : {"min", "max", "mean", "stddev", "range", "median_absolute_deviation",
                            "coefficient_of_variation", "jitter_mean_abs_delta", "jitter_p95_abs_delta",
                            "jitter_rms_delta", "outlier_fraction", "outlier_threshold",
                            "percentile_resolution"})
      out[key] = nullptr;
    return out;
  }

  const std::vector<double> sorted = sorted_copy(samples);
  for (const auto& p : kPercentiles) out[p.key] = fraction_of_sorted(sorted, p.fraction);
  const double p25 = fraction_of_sorted(sorted, 0.25);
  const double p75 = fraction_of_sorted(sorted, 0.75);
  const double median = fraction_of_sorted(sorted, 0.5);

  const double mean = exact_mean(samples);
  std::vector<double> squared_deviations(n);
  std::vector<double> abs_deviations(n);
  for (std::size_t i = 0; i < n; ++i) {
    squared_deviations[i] = (samples[i] - mean) * (samples[i] - mean);
    abs_deviations[i] = std::fabs(samples[i] - median);
  }
  // Population standard deviation: V0.1 used statistics.pstdev (every sample is the whole
  // population of that run, not an estimate of a larger one).
  const double stddev = std::sqrt(exact_mean(squared_deviations));
  std::sort(abs_deviations.begin(), abs_deviations.end());

  out["min"] = sorted.front();
  out["max"] = sorted.back();
  out["mean"] = mean;
  out["stddev"] = stddev;
  out["range"] = sorted.back() - sorted.front();
  out["median_absolute_deviation"] = fraction_of_sorted(abs_deviations, 0.5);
  out["coefficient_of_variation"] = mean != 0.0 ? json(stddev / mean) : json(nullptr);

  // Jitter: differences between consecutive samples, in the order they were taken.
  if (n >= 2) {
    std::vector<double> abs_deltas(n - 1);
    std::vector<double> squared_deltas(n - 1);
    for (std::size_t i = 1; i < n; ++i) {
      const double delta = samples[i] - samples[i - 1];
      abs_deltas[i - 1] = std::fabs(delta);
      squared_deltas[i - 1] = delta * delta;
    }
    out["jitter_mean_abs_delta"] = exact_mean(abs_deltas);
    out["jitter_rms_delta"] = std::sqrt(exact_mean(squared_deltas));
    std::sort(abs_deltas.begin(), abs_deltas.end());
    out["jitter_p95_abs_delta"] = fraction_of_sorted(abs_deltas, 0.95);
  } else {
    out["jitter_mean_abs_delta"] = nullptr;
    out["jitter_p95_abs_delta"] = nullptr;
    out["jitter_rms_delta"] = nullptr;
  }

  // Tukey's upper fence: a sample strictly above p75 + 1.5 * IQR is an outlier.
  const double threshold = p75 + 1.5 * (p75 - p25);
  const auto outliers = static_cast<std::size_t>(
      std::count_if(samples.begin(), samples.end(), [&](double x) { return x > threshold; }));
  out["outlier_count"] = outliers;
  out["outlier_fraction"] = static_cast<double>(outliers) / static_cast<double>(n);
  out["outlier_threshold"] = threshold;
  // The smallest step in rank one sample makes: percentiles finer than this are interpolated.
  out["percentile_resolution"] = 1.0 / static_cast<double>(n);
  return out;
}

}  // namespace wcomm::bench
