#!/usr/bin/python3
"""One-way goodput of 64 MiB torch tensors between two Python processes (wireless_comm), next
to the C++ API's goodput for the same message size measured in the same run by
`wcomm bench initiator/responder` (apps/netbench: the V0.1 benchmark protocol, C++ on both ends).

    /usr/bin/python3 bench/python_goodput.py [--wcomm build/wcomm] [--size 67108864] [--count 8] [--trials 3]

Both measurements time the same thing: from the receiver's "ready" to its "complete" after
`count` messages, with two messages in flight (the sender queues the next before the current
one finishes). Prints MB/s for each and the ratio (target: Python >= 0.8x C++).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUE_BYTES = 512 << 20  # room for two messages in flight, as `wcomm bench` keeps
BULK_TAG, CONTROL_TAG = 1, 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def python_role(role: str, port_a: int, port_b: int, size: int, count: int, trials: int) -> None:
    import torch

    from wireless_comm import Comm, CommConfig, CommOptions, Peer

    config = CommConfig(max_peer_queued_bytes=QUEUE_BYTES)
    a, b = Peer("sender", "127.0.0.1", port_a), Peer("receiver", "127.0.0.1", port_b)
    local, remote = (a, b) if role == "sender" else (b, a)
    comm = await Comm.create(local=local, peers=[remote], config=config)
    peer = comm.peer(remote.node_id)
    control, bulk = CommOptions(tag=CONTROL_TAG), CommOptions(tag=BULK_TAG)
    if role == "receiver":
        for _ in range(trials):
            recvs = [asyncio.create_task(comm.recv(peer, bulk)) for _ in range(count)]
            await comm.send("ready", peer, options=control)
            for i in range(count):
                got, _ = await recvs[i]
                recvs[i] = None  # as the C++ receiver does: each payload is dropped once counted
                assert got.numel() * got.element_size() == size
                del got
            await comm.send("complete", peer, options=control)
    else:
        tensor = torch.zeros(size, dtype=torch.uint8)
        results = []
        for _ in range(trials):
            assert (await comm.recv(peer, control))[0] == "ready"
            start = time.perf_counter()
            in_flight = []
            for _ in range(count):
                if len(in_flight) >= 2:
                    await in_flight.pop(0)
                in_flight.append(asyncio.create_task(comm.send(tensor, peer, options=bulk)))
            for s in in_flight:
                await s
            assert (await comm.recv(peer, control))[0] == "complete"
            results.append(size * count / (time.perf_counter() - start) / 1e6)
            stats = comm.stats()
        print(json.dumps({"MBps": results, "bytes_copied": stats["bytes_copied"]}))
    await comm.close()


def measure_python(size: int, count: int, trials: int) -> list:
    pa, pb = free_port(), free_port()
    args = [str(pa), str(pb), str(size), str(count), str(trials)]
    receiver = subprocess.Popen([sys.executable, __file__, "--role", "receiver", *args])
    out = subprocess.run([sys.executable, __file__, "--role", "sender", *args], capture_output=True, text=True,
                         timeout=600, check=True).stdout
    receiver.wait(timeout=60)
    got = json.loads(out.strip().splitlines()[-1])
    print(f"python   {size} B x {count}: " + " ".join(f"{v:.0f}" for v in got["MBps"]) +
          f" MB/s (sender bytes_copied={got['bytes_copied']})")
    return got["MBps"]


def measure_cpp(wcomm: str, size: int, count: int, trials: int) -> list:
    pa, pb = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        def config(name, me, port, other, other_port):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(f"local: {{node_id: {me}, host: 127.0.0.1, port: {port}}}\n"
                        f"peers: [{{node_id: {other}, host: 127.0.0.1, port: {other_port}}}]\n"
                        f"comm: {{max_peer_queued_bytes: {QUEUE_BYTES}}}\n")
            return path

        ca, cb = config("a.yaml", "a", pa, "b", pb), config("b.yaml", "b", pb, "a", pa)
        report = os.path.join(tmp, "report.json")
        responder = subprocess.Popen([wcomm, "bench", "--config", cb, "responder", "--peer", "a", "--quiet"])
        subprocess.run([wcomm, "bench", "--config", ca, "initiator", "--peer", "b", "--quiet", "--output", report,
                        "--latency-sizes", "64", "--latency-rounds", "10", "--throughput-sizes", str(size),
                        "--throughput-target-bytes", str(size * count), "--throughput-trials", str(trials),
                        "--directions", "upload"], check=True, timeout=600)
        responder.wait(timeout=60)
        with open(report) as f:
            upload = json.load(f)["throughput"]["upload"][0]
    results = [t["aggregate_goodput_mbps"] * 1e6 / 8 / 1e6 for t in upload["trials"]] if "trials" in upload else \
        [upload["aggregate_goodput_mbps"]["p50"] / 8]
    print(f"c++ api  {size} B x {count}: " + " ".join(f"{v:.0f}" for v in results) + " MB/s (wcomm bench upload)")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", nargs=6, help=argparse.SUPPRESS)
    ap.add_argument("--wcomm", default=os.path.join(HERE, "..", "build", "wcomm"), help="the C++ wcomm CLI")
    ap.add_argument("--size", type=int, default=64 << 20)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2, help="alternating runs of each")
    args = ap.parse_args()
    if args.role:
        role, pa, pb, size, count, trials = args.role
        asyncio.run(python_role(role, int(pa), int(pb), int(size), int(count), int(trials)))
        return
    py, cpp = [], []
    for _ in range(args.repeat):
        cpp += measure_cpp(args.wcomm, args.size, args.count, args.trials)
        py += measure_python(args.size, args.count, args.trials)
    p, c = statistics.median(py), statistics.median(cpp)
    print(f"summary size={args.size} python_MBps={p:.0f} cpp_api_MBps={c:.0f} ratio={p / c:.2f} (target >= 0.8)")


if __name__ == "__main__":
    main()
