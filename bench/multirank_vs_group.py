#!/usr/bin/python3
"""`wcomm multirank` (V0.1's two-host tool, on loopback with --ranks-per-host 2: 4 ranks in two
processes) against the library it runs on, in the same run: its 64 MiB ring_allreduce p50 with
V0.1's XOR (the default, Group's kBitXor), with --reduce sum --dtype float32, and with
--algorithm v01 (V0.1's own ring, what a V0.1 rank needs), beside the fair reference (Group's
allreduce in the tool's own layout: 2 processes x 2 rank threads, auto, then tcp;
bench/collectives_allreduce with WCOMM_BENCH_RANKS_PER_PROCESS=2) and
bench/collectives_vs_gloo.py (Group over tcp and auto and torch gloo over tcp, 4 one-rank
processes). The tool's figure is V0.1's (the slowest rank each iteration); Group's is rank 0's
call time, so the tool's rank-0 p50 is printed too: that one is like-for-like.

    /usr/bin/python3 bench/multirank_vs_group.py [--rounds 10] [--build build]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

SIZE = 64 << 20


def free_port_pair():
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 60000:
            return port


def multirank_p50(wcomm, rounds, extra):
    port = free_port_pair()
    common = [wcomm, "multirank", "--local-host", "127.0.0.1", "--remote-host", "127.0.0.1",
              "--ranks-per-host", "2", "--base-port", str(port), "--quiet"]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "mr.json")
        responder = subprocess.Popen(common + ["responder"], stdout=subprocess.DEVNULL)
        try:
            subprocess.run(common + ["--output", out, "initiator", "--payload-sizes", str(SIZE), "--rounds", str(rounds),
                                     "--warmup-rounds", "2", "--collectives", "ring_allreduce", *extra],
                           check=True, timeout=600)
        finally:
            responder.wait(timeout=60)
        with open(out) as f:
            report = json.load(f)
    summary = report["collective_summary"]["ring_allreduce"][str(SIZE)]
    # V0.1's figure is the slowest rank's time each iteration; the Group reference is rank 0's
    # own call time (p50 over its rounds). Both are printed: rank 0's is the like-for-like one.
    return summary["collective_completion_ms"]["p50"], summary["per_rank_ms"]["0"]["p50"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    wcomm = os.path.join(args.build, "wcomm")
    print(f"# host: {os.cpu_count()} CPUs; 4 ranks (2 processes x 2); {args.rounds} rounds; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    for name, extra in [("xor (default: Group, auto)", []), ("sum float32 (Group, auto)", ["--reduce", "sum", "--dtype", "float32"]),
                        ("xor, --algorithm v01 (V0.1's ring)", ["--algorithm", "v01"])]:
        completion, rank_0 = multirank_p50(wcomm, args.rounds, extra)
        print(f"multirank ring_allreduce bytes={SIZE} {name}: p50_ms={completion:.2f} (slowest rank per iteration, "
              f"V0.1's figure) rank0_p50_ms={rank_0:.2f} (like the Group lines below)", flush=True)
    print("# the same run: Group in the tool's layout (2 processes x 2 rank threads)", flush=True)
    for transport in ("auto", "tcp"):
        env = dict(os.environ, WCOMM_BENCH_RANKS_PER_PROCESS="2", WCOMM_BENCH_TRANSPORT=transport)
        out = subprocess.run([os.path.join(args.build, "bench", "collectives_allreduce"), "4", str(args.rounds), str(SIZE)],
                             env=env, check=True, timeout=600, capture_output=True, text=True).stdout
        print("\n".join(line for line in out.splitlines() if line.startswith("wcomm allreduce")), flush=True)
    print("# the same run: bench/collectives_vs_gloo.py", flush=True)
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "collectives_vs_gloo.py"),
                    "--rounds", str(args.rounds), "--build", args.build], check=True)


if __name__ == "__main__":
    main()
