"""`python -m wireless_comm.benchmark` with V0.1's command line (seed document, V0.1's
defaults), run on loopback as a V0.1 user runs it: the report's keys with V0.1's meaning, the
command line checks V0.1 made (load directions, interfaces), the fast failure without a
responder, and `wcomm report` drawing a V0.1 report's load scenarios."""

import json
import os
import subprocess
import tempfile
import threading
import time

import pytest
import torch

from wireless_comm import benchmark
from helpers import PYTHON, REPO, child_env, free_port, node_yaml, write_node_pair

DEADLINE_S = 60
needs_wcomm = pytest.mark.skipif(benchmark.find_wcomm() is None,
                                 reason="no wcomm executable (package without _bin/wcomm, no $WCOMM_CLI)")

V01_SUMMARY_KEYS = {
    "sample_count", "percentile_resolution", "min", "mean", "p01", "p05", "p25", "p50", "p75", "p90", "p95", "p99",
    "p99_9", "max", "range", "stddev", "coefficient_of_variation", "median_absolute_deviation",
    "jitter_mean_abs_delta", "jitter_p95_abs_delta", "jitter_rms_delta", "outlier_threshold", "outlier_count",
    "outlier_fraction"}


def module(config, *args):
    return [PYTHON, "-m", "wireless_comm.benchmark", "--config", str(config), *args]


def run_module(argv, timeout=DEADLINE_S):
    started = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, env=child_env(), timeout=timeout)
    return result, time.monotonic() - started


@pytest.fixture
def configs(tmp_path):
    return write_node_pair(str(tmp_path))


class Background:
    """A child process whose stderr is read on a thread, so a test can wait for a line."""

    def __init__(self, argv):
        self.out = tempfile.TemporaryFile(mode="w+")  # a file, so a large stdout never blocks the child
        self.process = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.PIPE, text=True, env=child_env())
        self.err_lines = []
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stderr:
            with self._seen:
                self.err_lines.append(line)
                self._seen.notify_all()

    def wait_for_stderr(self, text, timeout):
        with self._seen:
            return self._seen.wait_for(lambda: any(text in line for line in self.err_lines)
                                       or self.process.poll() is not None, timeout) and \
                any(text in line for line in self.err_lines)

    def finish(self, timeout=DEADLINE_S):
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"{self.process.args} did not finish within {timeout} s: {''.join(self.err_lines)}")
        self._reader.join(timeout=5)
        self.out.seek(0)
        return self.process.returncode, self.out.read(), "".join(self.err_lines)


def test_defaults_and_translation_are_v01s():
    # V0.1's defaults, unless the user passes others.
    args = benchmark.build_parser().parse_args(["--config", "x.yaml", "initiator", "--peer", "node-b"])
    settings = benchmark.settings_from_args(args)
    assert settings == benchmark.BenchmarkSettings()
    assert settings.latency_sizes == (0, 64, 1024, 65536) and settings.latency_rounds == 100
    assert settings.throughput_sizes == (1024, 65536, 1048576, 8388608)
    assert settings.throughput_trials == 5 and settings.ping_count == 10
    assert settings.operation_timeout == 120.0 and args.sample_interval == 1.0
    assert settings.message_count(100000) == 168  # ceil(16 MiB / 100000), as V0.1
    argv = benchmark.wcomm_bench_arguments(args, settings, None)
    pairs = dict(zip(argv, argv[1:]))
    assert argv[:4] == ["bench", "--config", "x.yaml", "initiator"]
    assert pairs["--latency-sizes"] == "0,64,1024,65536"
    assert pairs["--latency-rounds"] == "100"
    assert pairs["--throughput-sizes"] == "1024,65536,1048576,8388608"
    assert pairs["--throughput-trials"] == "5"
    assert pairs["--ping-count"] == "10"
    assert pairs["--operation-timeout"] == "120.0"
    assert "--load-fractions" not in argv and "--tensor-sizes" not in argv
    # The responder waits --timeout for the initiator, as V0.1's did for every request.
    args = benchmark.build_parser().parse_args(["--config", "x.yaml", "responder", "--peer", "node-a",
                                                "--timeout", "7"])
    argv = benchmark.wcomm_bench_arguments(args, None, "r.json")
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--wait-timeout"] == "7.0" and pairs["--operation-timeout"] == "7.0"


def test_summarize_samples_reproduces_v01s_summaries():
    # The latency entries of this file are the ones V0.1's initiator wrote (tests/data/README.md).
    with open(os.path.join(REPO, "tests", "data", "v01-report-four-load-scenarios.json")) as f:
        report = json.load(f)
    for entry in report["latency"]:
        assert benchmark.summarize_samples(entry["samples_ms"]) == entry["summary_ms"]
    for trials in report["throughput"]["upload"]:
        samples = [t["aggregate_goodput_mbps"] for t in trials["trials"]]
        assert benchmark.summarize_samples(samples) == trials["aggregate_goodput_mbps"]


@needs_wcomm
def test_v01_command_line_on_loopback(configs, tmp_path):
    a, b = configs
    report_path = tmp_path / "report.json"
    responder = Background(module(b, "responder", "--peer", "node-a", "--interface", "lo", "--timeout", "60"))
    assert responder.wait_for_stderr("listening on", DEADLINE_S), "".join(responder.err_lines)
    result, _ = run_module(module(
        a, "initiator", "--peer", "node-b", "--interface", "lo", "--timeout", "60",
        "--latency-sizes", "0,64", "--latency-rounds", "5", "--warmup-rounds", "2",
        "--throughput-sizes", "65536", "--throughput-target-bytes", "262144", "--throughput-trials", "2",
        "--directions", "upload,download", "--ping-count", "1",
        "--tensor-sizes", "16,4096", "--tensor-rounds", "3",
        "--load-fractions", "0.05", "--load-directions", "upload,download", "--load-concurrencies", "1",
        "--load-duration", "0.4", "--load-probe-interval", "0.02",
        "--output", str(report_path)))
    rc, responder_out, responder_err = responder.finish()
    assert result.returncode == 0, result.stderr
    assert rc == 0, responder_err
    assert f"wrote benchmark report to {report_path}" in result.stderr
    report = json.loads(report_path.read_text())
    # V0.1's responder printed its own section on stdout: the one the initiator's report holds.
    assert json.loads(responder_out) == report["responder"]

    assert report["schema_version"] == 4
    s = report["settings"]
    assert s["latency_sizes"] == [0, 64] and s["throughput_sizes"] == [65536]
    assert s["directions"] == ["upload", "download"] and s["operation_timeout"] == 60.0
    assert s["min_throughput_messages"] == 4 and s["random_seed"] == 0  # V0.1 defaults where not given
    assert [e["payload_bytes"] for e in report["latency"]] == [0, 64]
    assert report["throughput"]["upload"][0]["messages_per_direction"] == 4
    assert report["initiator"]["interface"] == "lo" and report["responder"]["interface"] == "lo"

    tensor = report["tensor"]
    assert tensor["torch_version"] == torch.__version__
    assert tensor["device"] == "cpu"
    assert tensor["structure_round_trip"] == {"single_tensor": True, "tensor_list": True, "tensor_dict": True}
    assert [t["payload_bytes"] for t in tensor["round_trip"]] == [16, 4096]
    for entry in tensor["round_trip"]:
        assert entry["elements"] == entry["payload_bytes"] // 4 and entry["rounds"] == 3
        assert set(entry["round_trip_ms"]) == V01_SUMMARY_KEYS
        assert set(entry["round_trip_goodput_mbps"]) == V01_SUMMARY_KEYS
        assert entry["round_trip_ms"]["sample_count"] == 3 == len(entry["samples_ms"])
        fastest = min(entry["samples_ms"])
        assert entry["round_trip_goodput_mbps"]["max"] == pytest.approx(
            entry["payload_bytes"] * 2 * 8 / (fastest / 1e3) / 1e6, rel=1e-9)

    scenarios = report["latency_under_load"]
    assert [(x["direction"], x["concurrency_per_direction"], x["load_fraction"]) for x in scenarios] == [
        ("upload", 1, 0.05), ("download", 1, 0.05)]
    for x in scenarios:
        capacity = max(e["aggregate_goodput_mbps"]["p50"] for e in report["throughput"][x["direction"]])
        assert x["capacity_reference_mbps"] == capacity
        assert set(x["probe_summary_ms"]) == V01_SUMMARY_KEYS
        assert x["probe_summary_ms"]["sample_count"] == len(x["probe_samples_ms"]) > 0
        assert x["probe_payload_bytes"] == 64 and x["probe_interval_s"] == 0.02
        load = x["background_load"]
        assert set(load) == {"direction", "streams", "target_mbps", "elapsed_s", "transferred_bytes", "goodput_mbps"}
        assert load["direction"] == x["direction"] and load["streams"] == 1
        assert load["target_mbps"] == pytest.approx(0.05 * capacity)
        assert load["transferred_bytes"] > 0
        assert load["goodput_mbps"] == pytest.approx(load["transferred_bytes"] * 8 / load["elapsed_s"] / 1e6)
        assert x["delivered_load_fraction"] == pytest.approx(load["goodput_mbps"] / capacity)


def test_load_direction_not_measured_is_rejected(configs):
    a, _ = configs
    result, _ = run_module(module(a, "initiator", "--peer", "node-b", "--directions", "upload",
                                     "--load-fractions", "0.5", "--load-directions", "upload,download"))
    assert result.returncode == 1
    assert "load directions require matching throughput directions" in result.stderr
    # Without load fractions, the load directions are not used and not checked (as V0.1).
    args = benchmark.build_parser().parse_args(["--config", "x", "initiator", "--peer", "b", "--directions",
                                                "upload", "--load-directions", "download"])
    benchmark.settings_from_args(args)


@pytest.mark.parametrize("role,peer", [("initiator", "node-b"), ("responder", "node-a")])
def test_unknown_interface_is_rejected(configs, role, peer):
    a, b = configs
    result, _ = run_module(module(a if role == "initiator" else b, role, "--peer", peer,
                                  "--interface", "wcomm-no-such0"))
    assert result.returncode == 1
    assert "network interface 'wcomm-no-such0' does not exist" in result.stderr


def test_bad_command_lines(configs):
    a, _ = configs
    for args, message in [(["initiator", "--peer", "node-x"], "unknown configured peer 'node-x'"),
                          (["initiator", "--peer", "node-b", "--tensor-sizes", "6"], "multiples of 4"),
                          (["initiator", "--peer", "node-b", "--latency-sizes", "a"], "comma-separated integers")]:
        result, _ = run_module(module(a, *args))
        assert result.returncode == 1, args
        assert message in result.stderr, result.stderr
    result, _ = run_module([PYTHON, "-m", "wireless_comm.benchmark", "initiator", "--peer", "b"])
    assert result.returncode == 2  # argparse: --config is required


@needs_wcomm
def test_initiator_without_responder_fails_fast(tmp_path):
    config = tmp_path / "node-a.yaml"
    # Nobody listens on node-b's port: V0.1 gave up after a few quick retries (about 2 s); the
    # benchmark must not add its 120 s operation timeout to the dial's.
    config.write_text(node_yaml("node-a", free_port(), "node-b", free_port()))
    result, took = run_module(module(config, "initiator", "--peer", "node-b", "--ping-count", "1", "--quiet"))
    assert result.returncode == 1, result.stderr
    assert "no benchmark responder reachable at tcp://127.0.0.1:" in result.stderr
    assert took < 10


@needs_wcomm
def test_wcomm_report_draws_a_v01_reports_load_scenarios(tmp_path):
    source = os.path.join(REPO, "tests", "data", "v01-report-four-load-scenarios.json")
    page = tmp_path / "v01.html"
    result = subprocess.run([benchmark.find_wcomm(), "report", source, "-o", str(page), "--quiet"],
                            capture_output=True, text=True, timeout=DEADLINE_S)
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    start = html.index('<svg id="plot-load-rtt-vs-delivered"')
    plot = html[start:html.index("</svg>", start)]
    assert "no latency-under-load scenarios" not in plot
    assert plot.count('<circle class="point"') == 8  # p50 and p99 of four scenarios
