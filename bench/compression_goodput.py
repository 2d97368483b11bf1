"""One side of the compression goodput measurement (bench/run_wifi_bench.sh): `recv` reads
tensors from node-a until None; `send` sends COUNT tensors of BYTES (pattern sparse: 7 of 8
float32 values zero, the rest random; random: random bytes) with ack (each completes once the
peer has read it), compression auto or off, and prints one JSON line: goodput in Mbit/s of
payload and the Comm's compression stats.

Usage: compression_goodput.py recv|send --local HOST:PORT --peer HOST:PORT
       [--pattern sparse|random] [--compression auto|off] [--bytes N] [--count K]"""

import argparse
import asyncio
import json
import time

import torch

from wireless_comm import Comm, CommConfig, CommOptions, Peer


def tensor(pattern: str, nbytes: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(5)
    if pattern == "random":
        return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)
    t = torch.zeros(nbytes // 4, dtype=torch.float32)
    t[::8] = torch.rand(t[::8].shape, generator=g)
    return t


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["send", "recv"])
    ap.add_argument("--local", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--pattern", choices=["sparse", "random"], default="sparse")
    ap.add_argument("--compression", choices=["auto", "off"], default="auto")
    ap.add_argument("--bytes", type=int, default=4 << 20)
    ap.add_argument("--count", type=int, default=4)
    a = ap.parse_args()
    lh, lp = a.local.rsplit(":", 1)
    ph, pp = a.peer.rsplit(":", 1)
    me, other = ("node-a", "node-b") if a.role == "send" else ("node-b", "node-a")
    comm = await Comm.create(local=Peer(me, lh, int(lp)), peers=[Peer(other, ph, int(pp))],
                             config=CommConfig(transport="tcp", compression=a.compression))
    peer = comm.peer(other)
    try:
        if a.role == "recv":
            while True:
                value, _ = await comm.recv(peer, CommOptions(timeout=300))
                if value is None:
                    return
        t = tensor(a.pattern, a.bytes)
        await comm.send("warm-up", peer, options=CommOptions(ack=True))
        start = time.monotonic()
        for _ in range(a.count):
            await comm.send(t, peer, options=CommOptions(ack=True))
        elapsed = time.monotonic() - start
        await comm.send(None, peer)
        s = comm.stats()
        print(json.dumps({"pattern": a.pattern, "compression": a.compression, "bytes": a.bytes * a.count,
                          "elapsed_s": elapsed, "goodput_mbps": a.bytes * a.count * 8 / elapsed / 1e6,
                          "compression_bytes_in": s["compression_bytes_in"],
                          "compression_bytes_out": s["compression_bytes_out"],
                          "compression_seconds": s["compression_seconds"]}))
    finally:
        await comm.close()


asyncio.run(main())
