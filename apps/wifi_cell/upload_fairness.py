#!/usr/bin/python3
"""Stations uploading to one host at once: the goodput each gets, and Jain's index over them
(docs/wifi.md, "Three stations uploading"). Run by apps/wifi_cell/fairness-study.sh, one
`sink` on the host behind the access point and one `source` per station, all started before
the same wall-clock instant `--start` (the namespaces share the clock):

    upload_fairness.py sink   --design wcomm|v01 --host H --port P --stations ADDR,ADDR,... --start T --duration D
    upload_fairness.py source --design wcomm|v01 --host H --port P --index I --local ADDR --start T --duration D

Sources send 256 KiB messages of random bytes (incompressible: wcomm's adaptive compression has nothing
to win) back to back from T to T+D. The sink counts, per station, the bytes of the messages
that completed in the window [T+1, T+D-0.5] (the first second is the flows' ramp), and prints
one JSON line: per-station Mbit/s, the sum, and Jain's index (sum x)^2 / (n sum x^2).

Designs: `wcomm` is wireless_comm (Comm.send / Comm.recv, one Comm per node, the sink with
every station as a peer); `v01` is V0.1's design as bench/anchors/asyncio_baseline.py builds
it: plain asyncio TCP, each message a 4-byte length and its payload, one connection per pair.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import time

MESSAGE = 256 << 10  # small enough that the window's edges cut off little of a station's count
TAG = 7


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


async def until(t: float) -> None:
    await asyncio.sleep(max(0.0, t - time.time()))


class Counter:
    """Bytes of the messages each station completed inside the window."""

    def __init__(self, n: int, start: float, duration: float) -> None:
        self.bytes = [0] * n
        self.lo, self.hi = start + 1.0, start + duration - 0.5

    def add(self, i: int, nbytes: int) -> None:
        if self.lo <= time.time() <= self.hi:
            self.bytes[i] += nbytes

    def report(self, design: str) -> dict:
        mbps = [8 * b / (self.hi - self.lo) / 1e6 for b in self.bytes]
        return {"design": design, "window_s": self.hi - self.lo, "station_mbps": [round(x, 2) for x in mbps],
                "sum_mbps": round(sum(mbps), 2), "jain": round(jain(mbps), 4)}


async def wcomm_sink(a: argparse.Namespace, stations: list[str]) -> dict:
    from wireless_comm import Comm, CommConfig, CommOptions, Peer

    peers = [Peer(f"sta{i + 1}", host, a.port) for i, host in enumerate(stations)]
    comm = await Comm.create(local=Peer("sink", a.host, a.port), peers=peers,
                             config=CommConfig(heartbeat_interval_s=0), tensors="numpy")
    counter = Counter(len(peers), a.start, a.duration)
    options = CommOptions(tag=TAG, timeout=a.duration + 30)

    async def drain(i: int) -> None:
        peer = comm.peer(peers[i].node_id)
        while True:
            got, _ = await comm.recv(peer, options)
            counter.add(i, got.nbytes)

    drains = [asyncio.ensure_future(drain(i)) for i in range(len(peers))]
    await until(a.start + a.duration + 1.0)  # the sources have stopped
    for d in drains:
        d.cancel()
    await asyncio.gather(*drains, return_exceptions=True)
    await comm.close()
    return counter.report("wcomm")


async def wcomm_source(a: argparse.Namespace) -> None:
    import numpy as np

    from wireless_comm import Comm, CommConfig, CommOptions, Peer

    sink = Peer("sink", a.host, a.port)
    comm = await Comm.create(local=Peer(f"sta{a.index}", a.local, a.port), peers=[sink],
                             config=CommConfig(heartbeat_interval_s=0), tensors="numpy")
    payload = np.random.default_rng().integers(0, 256, MESSAGE, dtype=np.uint8)
    peer = comm.peer("sink")
    options = CommOptions(tag=TAG, timeout=60)
    await until(a.start)
    # Two in flight, as a training loop that queues its next tensor keeps the link busy.
    pending: list[asyncio.Task] = []
    while time.time() < a.start + a.duration:
        pending.append(asyncio.ensure_future(comm.send(payload, peer, options=options)))
        if len(pending) >= 2:
            await pending.pop(0)
    await asyncio.gather(*pending)
    await comm.close()


async def v01_sink(a: argparse.Namespace, stations: list[str]) -> dict:
    counter = Counter(len(stations), a.start, a.duration)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        i = stations.index(writer.get_extra_info("peername")[0])
        try:
            while True:
                (n,) = struct.unpack(">I", await reader.readexactly(4))
                await reader.readexactly(n)
                counter.add(i, n)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, a.host, a.port)
    await until(a.start + a.duration + 1.0)
    server.close()
    return counter.report("v01")


async def v01_source(a: argparse.Namespace) -> None:
    await until(a.start - 1.0)
    reader, writer = await asyncio.open_connection(a.host, a.port, local_addr=(a.local, 0))
    frame = struct.pack(">I", MESSAGE) + os.urandom(MESSAGE)
    await until(a.start)
    try:
        while time.time() < a.start + a.duration:
            writer.write(frame)
            await writer.drain()
    except ConnectionError:
        pass
    writer.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["sink", "source"])
    p.add_argument("--design", choices=["wcomm", "v01"], required=True)
    p.add_argument("--host", required=True, help="the sink's address")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--stations", help="sink: the stations' addresses, comma-separated, in index order")
    p.add_argument("--index", type=int, help="source: this station's index, from 1")
    p.add_argument("--local", help="source: this station's address")
    p.add_argument("--start", type=float, required=True, help="wall-clock time the sources start")
    p.add_argument("--duration", type=float, default=10.0)
    a = p.parse_args()
    if a.role == "sink":
        stations = a.stations.split(",")
        run = wcomm_sink if a.design == "wcomm" else v01_sink
        print(json.dumps(asyncio.run(run(a, stations))), flush=True)
    else:
        asyncio.run((wcomm_source if a.design == "wcomm" else v01_source)(a))


if __name__ == "__main__":
    main()
