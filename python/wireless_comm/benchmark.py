"""End-to-end Wi-Fi benchmark with V0.1's command line, run by wcomm's C++ benchmark.

    python -m wireless_comm.benchmark --config node-b.yaml responder --peer node-a
    python -m wireless_comm.benchmark --config node-a.yaml initiator --peer node-b \\
        --output report.json

The options, defaults, checks, outputs and report keys are V0.1's (docs/benchmark-report.md).
This module checks the command line as V0.1 did, then runs `wcomm bench` (the executable
shipped inside this package; $WCOMM_CLI or a `wcomm` on PATH otherwise) with the same settings,
so the measurements are those of wcomm's C++ benchmark and a V0.1 node can be the other side.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

_DIRECTIONS = ("upload", "download", "bidirectional")
_PROG = "wireless_comm.benchmark"


@dataclass(frozen=True)
class BenchmarkSettings:
    """The initiator's settings, with V0.1's names, defaults and checks (ValueError)."""

    latency_sizes: Tuple[int, ...] = (0, 64, 1024, 65536)
    latency_rounds: int = 100
    warmup_rounds: int = 10
    throughput_sizes: Tuple[int, ...] = (1024, 65536, 1048576, 8388608)
    throughput_target_bytes: int = 16 * 1024 * 1024
    min_throughput_messages: int = 4
    max_throughput_messages: int = 4096
    throughput_trials: int = 5
    directions: Tuple[str, ...] = _DIRECTIONS
    tensor_sizes: Tuple[int, ...] = ()
    tensor_rounds: int = 10
    ping_count: int = 10
    operation_timeout: float = 120.0
    sample_interval: float = 1.0
    load_fractions: Tuple[float, ...] = ()
    load_directions: Tuple[str, ...] = _DIRECTIONS
    load_concurrencies: Tuple[int, ...] = (1, 4)
    load_duration: float = 10.0
    load_probe_interval: float = 0.05
    load_probe_size: int = 64
    random_seed: int = 0

    def __post_init__(self) -> None:
        if not self.latency_sizes or any(size < 0 for size in self.latency_sizes):
            raise ValueError("latency sizes must be non-negative")
        if not self.throughput_sizes or any(size <= 0 for size in self.throughput_sizes):
            raise ValueError("throughput sizes must be positive")
        for name in ("latency_rounds", "throughput_target_bytes", "min_throughput_messages",
                     "max_throughput_messages", "throughput_trials", "ping_count", "tensor_rounds"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.warmup_rounds < 0:
            raise ValueError("warmup_rounds must be non-negative")
        if self.min_throughput_messages > self.max_throughput_messages:
            raise ValueError("minimum message count cannot exceed maximum")
        if any(size <= 0 or size % 4 for size in self.tensor_sizes):
            raise ValueError("Tensor sizes must be positive multiples of 4 bytes")
        if not self.directions or set(self.directions) - set(_DIRECTIONS):
            raise ValueError("unknown benchmark direction")
        if self.operation_timeout <= 0 or self.sample_interval <= 0:
            raise ValueError("timeouts and sample interval must be positive")
        if any(fraction <= 0 for fraction in self.load_fractions):
            raise ValueError("load fractions must be positive")
        if set(self.load_directions) - set(_DIRECTIONS):
            raise ValueError("unknown load direction")
        # The load of a direction is a fraction of that direction's measured goodput, so only a
        # direction the throughput phase measures can carry it.
        if self.load_fractions and not set(self.load_directions) <= set(self.directions):
            raise ValueError("load directions require matching throughput directions")
        if not self.load_concurrencies or any(n <= 0 for n in self.load_concurrencies):
            raise ValueError("load concurrencies must be positive")
        if self.load_duration <= 0 or self.load_probe_interval <= 0:
            raise ValueError("load duration and probe interval must be positive")
        if self.load_probe_size < 0:
            raise ValueError("load probe size must be non-negative")

    def message_count(self, size: int) -> int:
        """Messages per direction of one throughput trial of `size`-byte messages."""
        return min(self.max_throughput_messages,
                   max(self.min_throughput_messages, math.ceil(self.throughput_target_bytes / size)))


def summarize_samples(samples: Sequence[float]) -> dict:
    """The summary object of the report (p01 .. p99_9, jitter, outliers; docs/benchmark-report.md)."""
    if not samples:
        raise ValueError("cannot summarize an empty sample set")
    ordered = sorted(samples)
    p25, p50, p75 = (_percentile(ordered, f) for f in (0.25, 0.5, 0.75))
    deltas = [abs(b - a) for a, b in zip(samples, samples[1:])]
    mean = statistics.fmean(ordered)
    stddev = statistics.pstdev(ordered)
    threshold = p75 + 1.5 * (p75 - p25)
    outliers = sum(sample > threshold for sample in samples)
    return {
        "sample_count": len(samples),
        "percentile_resolution": 1 / len(samples),
        "min": ordered[0],
        "mean": mean,
        "p01": _percentile(ordered, 0.01),
        "p05": _percentile(ordered, 0.05),
        "p25": p25,
        "p50": p50,
        "p75": p75,
        "p90": _percentile(ordered, 0.90),
        "p95": _percentile(ordered, 0.95),
        "p99": _percentile(ordered, 0.99),
        "p99_9": _percentile(ordered, 0.999),
        "max": ordered[-1],
        "range": ordered[-1] - ordered[0],
        "stddev": stddev,
        "coefficient_of_variation": stddev / mean if mean else 0.0,
        "median_absolute_deviation": statistics.median(abs(s - p50) for s in samples),
        "jitter_mean_abs_delta": statistics.fmean(deltas) if deltas else 0.0,
        "jitter_p95_abs_delta": _percentile(sorted(deltas), 0.95) if deltas else 0.0,
        "jitter_rms_delta": math.sqrt(statistics.fmean(d * d for d in deltas)) if deltas else 0.0,
        "outlier_threshold": threshold,
        "outlier_count": outliers,
        "outlier_fraction": outliers / len(samples),
    }


def _percentile(ordered: Sequence[float], fraction: float) -> float:
    position = (len(ordered) - 1) * fraction
    lower = math.floor(position)
    weight = position - lower
    if weight == 0:
        return ordered[lower]
    return ordered[lower] * (1 - weight) + ordered[lower + 1] * weight


def build_parser() -> argparse.ArgumentParser:
    """V0.1's command line: global --config, then `responder` or `initiator` and their options."""
    parser = argparse.ArgumentParser(prog=f"python -m {_PROG}", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", required=True, help="node YAML configuration")
    subparsers = parser.add_subparsers(dest="command", required=True)

    responder = subparsers.add_parser("responder")
    _add_common_arguments(responder)

    initiator = subparsers.add_parser("initiator")
    _add_common_arguments(initiator)
    initiator.add_argument("--latency-sizes", default="0,64,1024,65536")
    initiator.add_argument("--latency-rounds", type=int, default=100)
    initiator.add_argument("--warmup-rounds", type=int, default=10)
    initiator.add_argument("--throughput-sizes", default="1024,65536,1048576,8388608")
    initiator.add_argument("--throughput-target-bytes", type=int, default=16 * 1024 * 1024)
    initiator.add_argument("--min-throughput-messages", type=int, default=4)
    initiator.add_argument("--max-throughput-messages", type=int, default=4096)
    initiator.add_argument("--throughput-trials", type=int, default=5)
    initiator.add_argument("--directions", default="upload,download,bidirectional")
    initiator.add_argument("--ping-count", type=int, default=10)
    initiator.add_argument("--tensor-sizes", default="",
                           help="optional comma-separated contiguous CPU Tensor sizes in bytes")
    initiator.add_argument("--tensor-rounds", type=int, default=10)
    initiator.add_argument("--load-fractions", default="",
                           help="capacity fractions for latency-under-load, for example 0.25,0.5,0.9")
    initiator.add_argument("--load-directions", default="upload,download,bidirectional")
    initiator.add_argument("--load-concurrencies", default="1,4")
    initiator.add_argument("--load-duration", type=float, default=10.0)
    initiator.add_argument("--load-probe-interval", type=float, default=0.05)
    initiator.add_argument("--load-probe-size", type=int, default=64)
    initiator.add_argument("--random-seed", type=int, default=0)
    return parser


def _add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--peer", required=True, help="configured remote node_id")
    parser.add_argument("--interface", help="Wi-Fi interface; defaults to the route-selected interface")
    parser.add_argument("--output", type=Path, help="write the JSON report to this file")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--sample-interval", type=float, default=1.0)
    # wcomm's addition: V0.1 printed nothing while it ran; wcomm prints progress on stderr.
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr (wcomm)")


def settings_from_args(args: argparse.Namespace) -> BenchmarkSettings:
    """The initiator's settings from its parsed command line (ValueError when they cannot run)."""
    return BenchmarkSettings(
        latency_sizes=_parse_sizes(args.latency_sizes),
        latency_rounds=args.latency_rounds,
        warmup_rounds=args.warmup_rounds,
        throughput_sizes=_parse_sizes(args.throughput_sizes),
        throughput_target_bytes=args.throughput_target_bytes,
        min_throughput_messages=args.min_throughput_messages,
        max_throughput_messages=args.max_throughput_messages,
        throughput_trials=args.throughput_trials,
        directions=tuple(args.directions.split(",")),
        tensor_sizes=_parse_sizes(args.tensor_sizes, allow_empty=True),
        tensor_rounds=args.tensor_rounds,
        ping_count=args.ping_count,
        operation_timeout=args.timeout,
        sample_interval=args.sample_interval,
        load_fractions=_parse_floats(args.load_fractions, allow_empty=True),
        load_directions=tuple(args.load_directions.split(",")),
        load_concurrencies=_parse_sizes(args.load_concurrencies),
        load_duration=args.load_duration,
        load_probe_interval=args.load_probe_interval,
        load_probe_size=args.load_probe_size,
        random_seed=args.random_seed,
    )


def _parse_sizes(raw: str, *, allow_empty: bool = False) -> Tuple[int, ...]:
    return _parse_list(raw, int, "message sizes must be comma-separated integers", allow_empty)


def _parse_floats(raw: str, *, allow_empty: bool = False) -> Tuple[float, ...]:
    return _parse_list(raw, float, "values must be comma-separated numbers", allow_empty)


def _parse_list(raw: str, kind: Any, message: str, allow_empty: bool) -> Tuple[Any, ...]:
    if allow_empty and not raw:
        return ()
    try:
        return tuple(kind(value) for value in raw.split(","))
    except ValueError as exc:
        raise ValueError(message) from exc


def _joined(values: Sequence[Any]) -> str:
    return ",".join(repr(v) if isinstance(v, float) else str(v) for v in values)


def wcomm_bench_arguments(args: argparse.Namespace, settings: Optional[BenchmarkSettings],
                          output: Optional[str]) -> List[str]:
    """The `wcomm bench` command line (after the executable) that runs what `args` asks for."""
    argv = ["bench", "--config", str(args.config), args.command, "--peer", args.peer,
            "--operation-timeout", repr(float(args.timeout)), "--sample-interval", repr(float(args.sample_interval))]
    if args.interface is not None:
        argv += ["--interface", args.interface]
    if output is not None:
        argv += ["--output", output]
    if args.quiet:
        argv.append("--quiet")
    if settings is None:
        # V0.1's responder waited --timeout for each request, the first one included.
        return argv + ["--wait-timeout", repr(float(args.timeout))]
    s = settings
    argv += ["--latency-sizes", _joined(s.latency_sizes), "--latency-rounds", str(s.latency_rounds),
             "--warmup-rounds", str(s.warmup_rounds), "--throughput-sizes", _joined(s.throughput_sizes),
             "--throughput-target-bytes", str(s.throughput_target_bytes),
             "--min-throughput-messages", str(s.min_throughput_messages),
             "--max-throughput-messages", str(s.max_throughput_messages),
             "--throughput-trials", str(s.throughput_trials), "--directions", _joined(s.directions),
             "--ping-count", str(s.ping_count), "--tensor-rounds", str(s.tensor_rounds),
             "--load-directions", _joined(s.load_directions), "--load-concurrencies", _joined(s.load_concurrencies),
             "--load-duration", repr(float(s.load_duration)), "--load-probe-interval", repr(float(s.load_probe_interval)),
             "--load-probe-size", str(s.load_probe_size), "--random-seed", str(s.random_seed)]
    if s.tensor_sizes:
        argv += ["--tensor-sizes", _joined(s.tensor_sizes)]
        version = _torch_version()
        if version is not None:
            argv += ["--torch-version", version]
    if s.load_fractions:
        argv += ["--load-fractions", _joined(s.load_fractions)]
    return argv


def _torch_version() -> Optional[str]:
    try:
        import torch  # noqa: PLC0415 (only when tensors are measured: importing torch is slow)
    except ImportError:
        return None
    return str(torch.__version__)


def find_wcomm() -> Optional[str]:
    """The `wcomm` executable: $WCOMM_CLI, else the one shipped in this package, else PATH's."""
    candidates = [os.environ.get("WCOMM_CLI"), str(Path(__file__).resolve().parent / "_bin" / "wcomm"),
                  shutil.which("wcomm")]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _check(args: argparse.Namespace) -> Optional[BenchmarkSettings]:
    """V0.1's checks before a run (ValueError, and the config loader's errors)."""
    from .config import load_runtime_config  # the extension loads only once the line parsed

    config = load_runtime_config(args.config)
    if args.peer not in {peer.node_id for peer in config.peers}:
        raise ValueError(f"unknown configured peer {args.peer!r}")
    settings = settings_from_args(args) if args.command == "initiator" else None
    if args.interface is not None and not _interface_exists(args.interface):
        raise ValueError(f"network interface {args.interface!r} does not exist")
    return settings


def _interface_exists(name: str) -> bool:
    return "/" not in name and name not in ("", ".", "..") and (Path("/sys/class/net") / name).exists()


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = _check(args)
    except (ValueError, OSError) as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 1
    wcomm = find_wcomm()
    if wcomm is None:
        print(f"{_PROG}: error: the wcomm executable was not found (this package ships one in "
              f"wireless_comm/_bin; reinstall with scripts/install-python.sh, or set WCOMM_CLI)", file=sys.stderr)
        return 1

    # V0.1 printed the report on stdout when --output was not given, the responder's too; the
    # responder of `wcomm bench` sends its report only to the initiator unless it has a file.
    with tempfile.TemporaryDirectory(prefix="wcomm-bench-") as scratch:
        output = str(args.output) if args.output is not None else None
        if output is None and args.command == "responder":
            output = os.path.join(scratch, "responder.json")
        code = _run([wcomm, *wcomm_bench_arguments(args, settings, output)])
        if code != 0:
            return code
        if args.output is not None:
            print(f"wrote benchmark report to {args.output}", file=sys.stderr)
        elif output is not None:
            sys.stdout.write(Path(output).read_text(encoding="utf-8"))
            sys.stdout.flush()
    return 0


def _run(command: List[str]) -> int:
    """Runs `wcomm bench` in the foreground; Ctrl-C reaches it too (same process group)."""
    process = subprocess.Popen(command)
    try:
        return process.wait()
    except KeyboardInterrupt:
        try:
            return process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
        return 130


if __name__ == "__main__":
    sys.exit(main())
