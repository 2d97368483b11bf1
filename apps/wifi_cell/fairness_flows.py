#!/usr/bin/python3
"""Flows sharing the cell at once: the goodput each gets, and Jain's index over them
(docs/wifi.md, "Flows sharing the cell"). Run by apps/wifi_cell/fairness-study.sh, which
starts every node before the same wall-clock instant `--start` (the namespaces share the clock):
one `sink` per receiving node and one `source` per sending node; a flow is one (source, sink)
pair. Stations uploading: each station a source, the host behind the access point the one
sink. Fan-out: that host the one source, each station a sink.

    upload_fairness.py sink   --design wcomm|v01 --local ADDR --peers ADDR,... --port P --start T --duration D
    upload_fairness.py source --design wcomm|v01 --local ADDR --peers ADDR,... --port P --start T --duration D

A source sends 256 KiB messages of random bytes (incompressible: wcomm's adaptive compression
has nothing to win) to each of its peers at once, back to back from T to T+D. A sink counts,
per peer, the bytes of the messages that completed in the window [T+1, T+D-0.5] (the first
second is the flows' ramp) and prints one JSON line: {"design", "window_s", "flows_mbps":
{source address: Mbit/s}}. fairness-study.sh merges the sinks' lines and computes Jain's index
(sum x)^2 / (n sum x^2) over the flows.

Designs: `wcomm` is wireless_comm (one Comm per node with every peer configured, Comm.send /
Comm.recv; WCOMM_FLOWS_COMM, a JSON object, adds CommConfig fields, e.g.
'{"tcp_target_queue_delay_us": 0}'); `v01` is V0.1's design as bench/anchors/asyncio_baseline.py builds it: plain asyncio
TCP, each message a 4-byte length and its payload, one connection per pair.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import time

MESSAGE = 256 << 10  # small enough that the window's edges cut off little of a flow's count
TAG = 7


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


async def until(t: float) -> None:
    await asyncio.sleep(max(0.0, t - time.time()))


class Counter:
    """Bytes of the messages each peer completed inside the window."""

    def __init__(self, peers: list[str], start: float, duration: float) -> None:
        self.bytes = {p: 0 for p in peers}
        self.lo, self.hi = start + 1.0, start + duration - 0.5

    def add(self, peer: str, nbytes: int) -> None:
        if self.lo <= time.time() <= self.hi:
            self.bytes[peer] += nbytes

    def report(self, design: str) -> dict:
        span = self.hi - self.lo
        return {"design": design, "window_s": span,
                "flows_mbps": {p: round(8 * b / span / 1e6, 2) for p, b in self.bytes.items()}}


def node_id(address: str) -> str:
    return "n-" + address


async def wcomm_node(a: argparse.Namespace):
    from wireless_comm import Comm, CommConfig, Peer

    return await Comm.create(local=Peer(node_id(a.local), a.local, a.port),
                             peers=[Peer(node_id(p), p, a.port) for p in a.peers],
                             config=CommConfig(heartbeat_interval_s=0,
                                               **json.loads(os.environ.get("WCOMM_FLOWS_COMM", "{}"))),
                             tensors="numpy")


async def wcomm_sink(a: argparse.Namespace) -> dict:
    from wireless_comm import CommOptions

    comm = await wcomm_node(a)
    counter = Counter(a.peers, a.start, a.duration)
    options = CommOptions(tag=TAG, timeout=a.duration + 30)

    async def drain(address: str) -> None:
        peer = comm.peer(node_id(address))
        while True:
            got, _ = await comm.recv(peer, options)
            counter.add(address, got.nbytes)

    drains = [asyncio.ensure_future(drain(p)) for p in a.peers]
    await until(a.start + a.duration + 1.0)  # the sources have stopped
    for d in drains:
        d.cancel()
    await asyncio.gather(*drains, return_exceptions=True)
    await comm.close()
    return counter.report("wcomm")


async def wcomm_source(a: argparse.Namespace) -> None:
    import numpy as np

    from wireless_comm import CommOptions

    comm = await wcomm_node(a)
    payload = np.random.default_rng().integers(0, 256, MESSAGE, dtype=np.uint8)
    options = CommOptions(tag=TAG, timeout=60)
    # Connected before the start, as V0.1's source below (Comm dials on the first send): a
    # connection opened behind the others' queue would measure that queue as its min RTT.
    await until(a.start - 1.0)
    hello = np.zeros(1, dtype=np.uint8)
    await asyncio.gather(*(comm.send(hello, comm.peer(node_id(p)), options=options) for p in a.peers))
    await until(a.start)

    async def flow(address: str) -> None:
        # Two in flight, as a training loop that queues its next tensor keeps the link busy.
        peer = comm.peer(node_id(address))
        pending: list[asyncio.Future] = []
        while time.time() < a.start + a.duration:
            pending.append(asyncio.ensure_future(comm.send(payload, peer, options=options)))
            if len(pending) >= 2:
                await pending.pop(0)
        await asyncio.gather(*pending)

    await asyncio.gather(*(flow(p) for p in a.peers))
    await comm.close()


async def v01_sink(a: argparse.Namespace) -> dict:
    counter = Counter(a.peers, a.start, a.duration)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        address = writer.get_extra_info("peername")[0]
        try:
            while True:
                (n,) = struct.unpack(">I", await reader.readexactly(4))
                await reader.readexactly(n)
                counter.add(address, n)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, a.local, a.port)
    await until(a.start + a.duration + 1.0)
    server.close()
    return counter.report("v01")


async def v01_source(a: argparse.Namespace) -> None:
    await until(a.start - 1.0)
    frame = struct.pack(">I", MESSAGE) + os.urandom(MESSAGE)

    async def flow(address: str) -> None:
        _, writer = await asyncio.open_connection(address, a.port, local_addr=(a.local, 0))
        await until(a.start)
        try:
            while time.time() < a.start + a.duration:
                writer.write(frame)
                await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    await asyncio.gather(*(flow(p) for p in a.peers))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["sink", "source"])
    p.add_argument("--design", choices=["wcomm", "v01"], required=True)
    p.add_argument("--local", required=True, help="this node's address")
    p.add_argument("--peers", required=True, help="the other end of each of this node's flows, comma-separated")
    p.add_argument("--port", type=int, required=True, help="every node's port")
    p.add_argument("--start", type=float, required=True, help="wall-clock time the sources start")
    p.add_argument("--duration", type=float, default=10.0)
    a = p.parse_args()
    a.peers = a.peers.split(",")
    if a.role == "sink":
        print(json.dumps(asyncio.run((wcomm_sink if a.design == "wcomm" else v01_sink)(a))), flush=True)
    else:
        asyncio.run((wcomm_source if a.design == "wcomm" else v01_source)(a))


if __name__ == "__main__":
    main()
