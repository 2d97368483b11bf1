// Summary statistics of a series of benchmark samples, with exactly the keys and formulas of
// the V0.1 report's *_ms / goodput summaries (see docs/benchmark-report.md).
#pragma once

#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

// The q-th percentile (0 <= q <= 100) of ascending `sorted` with numpy's default "linear"
// interpolation: rank h = (n-1)*q/100, value = x[floor h] + (h - floor h)*(x[ceil h] - x[floor h]).
// Requires a non-empty input.
double percentile_sorted(std::span<const double> sorted, double q);

// The V0.1 summary of `samples` (in the order they were taken; jitter uses that order):
// p01 p05 p25 p50 p75 p90 p95 p99 p99_9 min max mean stddev (population) range
// median_absolute_deviation coefficient_of_variation jitter_mean_abs_delta jitter_p95_abs_delta
// jitter_rms_delta outlier_count outlier_fraction outlier_threshold percentile_resolution
// sample_count. Values that are undefined for the input (any statistic of no samples, jitter
// of fewer than two, the coefficient of variation of a zero mean) are null.
nlohmann::json summarize(std::span<const double> samples);

}  // namespace wcomm::bench
