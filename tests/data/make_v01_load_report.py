"""Writes v01-report-four-load-scenarios.json: the V0.1 reference report
(reference-reports/v0.1-initiator-loopback.json, beside this script) with the latency_under_load
section that V0.1 writes for --load-fractions 0.5,0.9 --load-directions upload,download
--load-concurrencies 1: four scenarios with exactly V0.1's keys. The reference run had no load
phase, so the scenario values are made up (seeded, plausible for loopback); the keys, nesting
and units are V0.1's. Standalone on purpose: it computes V0.1's summary objects itself, so
wcomm's tests never check wcomm against numbers wcomm wrote.

Usage: /usr/bin/python3 tests/data/make_v01_load_report.py [REFERENCE_JSON]
"""

import json
import math
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def percentile(ordered, fraction):
    position = (len(ordered) - 1) * fraction
    lower, upper = math.floor(position), math.ceil(position)
    if lower == upper:
        return ordered[lower]
    weight = position - lower
    return ordered[lower] * (1 - weight) + ordered[upper] * weight


def summary(samples):
    """The 24-key summary object of V0.1's reports (docs/benchmark-report.md)."""
    ordered = sorted(samples)
    p25, p50, p75 = (percentile(ordered, f) for f in (0.25, 0.5, 0.75))
    deltas = [abs(b - a) for a, b in zip(samples, samples[1:])]
    stddev = statistics.pstdev(ordered)
    mean = statistics.fmean(ordered)
    threshold = p75 + 1.5 * (p75 - p25)
    outliers = sum(s > threshold for s in samples)
    return {
        "sample_count": len(samples), "percentile_resolution": 1 / len(samples),
        "min": ordered[0], "mean": mean,
        "p01": percentile(ordered, 0.01), "p05": percentile(ordered, 0.05), "p25": p25, "p50": p50,
        "p75": p75, "p90": percentile(ordered, 0.90), "p95": percentile(ordered, 0.95),
        "p99": percentile(ordered, 0.99), "p99_9": percentile(ordered, 0.999),
        "max": ordered[-1], "range": ordered[-1] - ordered[0], "stddev": stddev,
        "coefficient_of_variation": stddev / mean,
        "median_absolute_deviation": statistics.median(abs(s - p50) for s in samples),
        "jitter_mean_abs_delta": statistics.fmean(deltas),
        "jitter_p95_abs_delta": percentile(sorted(deltas), 0.95),
        "jitter_rms_delta": math.sqrt(statistics.fmean(d * d for d in deltas)),
        "outlier_threshold": threshold, "outlier_count": outliers,
        "outlier_fraction": outliers / len(samples),
    }


def main():
    default = os.path.join(HERE, "reference-reports", "v0.1-initiator-loopback.json")
    with open(sys.argv[1] if len(sys.argv) > 1 else default) as f:
        report = json.load(f)
    rng = random.Random(4)
    settings = report["settings"]
    settings.update(load_fractions=[0.5, 0.9], load_directions=["upload", "download"], load_concurrencies=[1])
    scenarios = []
    for direction in settings["load_directions"]:
        capacity = max(e["aggregate_goodput_mbps"]["p50"] for e in report["throughput"][direction])
        for concurrency in settings["load_concurrencies"]:
            for fraction in settings["load_fractions"]:
                base = 0.3 + 0.6 * fraction
                samples = [round(base * rng.uniform(0.8, 1.6), 6) for _ in range(40)]
                elapsed = settings["load_duration"] + rng.uniform(0.001, 0.01)
                target = capacity * fraction
                transferred = int(target * rng.uniform(0.93, 0.99) * 1e6 / 8 * elapsed)
                goodput = transferred * 8 / elapsed / 1e6
                scenarios.append({
                    "direction": direction,
                    "concurrency_per_direction": concurrency,
                    "capacity_reference_mbps": capacity,
                    "load_fraction": fraction,
                    "probe_payload_bytes": settings["load_probe_size"],
                    "probe_interval_s": settings["load_probe_interval"],
                    "probe_summary_ms": summary(samples),
                    "probe_samples_ms": samples,
                    "background_load": {
                        "direction": direction, "streams": concurrency, "target_mbps": target,
                        "elapsed_s": elapsed, "transferred_bytes": transferred, "goodput_mbps": goodput,
                    },
                    "delivered_load_fraction": goodput / capacity,
                })
    report["latency_under_load"] = scenarios
    with open(os.path.join(HERE, "v01-report-four-load-scenarios.json"), "w") as f:
        f.write(json.dumps(report, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
