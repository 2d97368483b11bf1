#!/usr/bin/python3
"""64 B round trip p50 with both ends in Python (wireless_comm, two processes on loopback),
next to bench/anchors/asyncio_baseline.py measured in the same run.

    /usr/bin/python3 bench/python_pingpong.py [--rounds 5000] [--size 64] [--repeat 3]

Prints one line per measurement and the ratio wireless_comm / asyncio (target: <= 0.8).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ANCHOR = os.path.join(HERE, "anchors", "asyncio_baseline.py")
WARMUP = 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def run_role(role: str, port_a: int, port_b: int, size: int, rounds: int) -> None:
    from wireless_comm import Comm, Peer

    a, b = Peer("ping", "127.0.0.1", port_a), Peer("pong", "127.0.0.1", port_b)
    local, remote = (a, b) if role == "ping" else (b, a)
    comm = await Comm.create(local=local, peers=[remote])
    peer = comm.peer(remote.node_id)
    total = WARMUP + rounds
    if role == "pong":
        for _ in range(total):
            obj, piggy = await comm.recv(peer)
            await comm.send(obj, peer)
    else:
        payload = os.urandom(size)
        lat = []
        for i in range(total):
            t = time.perf_counter()
            await comm.send(payload, peer)
            await comm.recv(peer)
            if i >= WARMUP:
                lat.append((time.perf_counter() - t) * 1e6)
        lat.sort()
        print(f"wireless_comm rtt size={size} p50_us={lat[len(lat) // 2]:.1f} p99_us={lat[int(len(lat) * 0.99)]:.1f}")
    await comm.close()


def measure_wireless_comm(size: int, rounds: int) -> float:
    pa, pb = free_port(), free_port()
    cmd = [sys.executable, __file__, "--role"]
    args = [str(pa), str(pb), "--size", str(size), "--rounds", str(rounds)]
    pong = subprocess.Popen(cmd + ["pong"] + args)
    out = subprocess.run(cmd + ["ping"] + args, capture_output=True, text=True, timeout=300, check=True).stdout
    pong.wait(timeout=30)
    print(out.strip())
    return float(re.search(r"p50_us=([\d.]+)", out).group(1))


def measure_asyncio(size: int, rounds: int) -> float:
    port = free_port()
    server = subprocess.Popen([sys.executable, ANCHOR, "server", str(port)])
    try:
        for _ in range(100):  # wait for the server to listen
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.02)
        out = subprocess.run([sys.executable, ANCHOR, "client", str(port), str(size), str(rounds + WARMUP), "rtt"],
                             capture_output=True, text=True, timeout=300, check=True).stdout
    finally:
        server.kill()
        server.wait()
    print(out.strip())
    return float(re.search(r"p50_us=([\d.]+)", out).group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", nargs=3, metavar=("ROLE", "PORT_A", "PORT_B"), help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each; the medians are compared")
    args = ap.parse_args()
    if args.role:
        role, pa, pb = args.role
        asyncio.run(run_role(role, int(pa), int(pb), args.size, args.rounds))
        return
    ours, theirs = [], []
    for _ in range(args.repeat):
        theirs.append(measure_asyncio(args.size, args.rounds))
        ours.append(measure_wireless_comm(args.size, args.rounds))
    o, t = statistics.median(ours), statistics.median(theirs)
    print(f"summary size={args.size} wireless_comm_p50_us={o:.1f} asyncio_baseline_p50_us={t:.1f} "
          f"ratio={o / t:.2f} (target <= 0.8)")


if __name__ == "__main__":
    main()
