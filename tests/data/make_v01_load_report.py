"""Writes v01-report-four-load-scenarios.json: the V0.1 reference report
(shared/reference-reports/v0.1-initiator-loopback.json, beside the checkout) with the
latency_under_load section that V0.1 writes for
--load-fractions 0.5,0.9 --load-directions upload,download --load-concurrencies 1: four
scenarios with exactly V0.1's keys. The reference run had no load phase, so the scenario values
are made up (seeded, plausible for loopback); the keys, nesting and units are V0.1's.

Usage: /usr/bin/python3 tests/data/make_v01_load_report.py [REFERENCE_JSON]
"""

import json
import os
import random
import sys

from wireless_comm.benchmark import summarize_samples  # V0.1's summary object

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    default = os.path.join(HERE, "..", "..", "..", "shared", "reference-reports", "v0.1-initiator-loopback.json")
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
                    "probe_summary_ms": summarize_samples(samples),
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
