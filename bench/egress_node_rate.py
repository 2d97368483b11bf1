"""The egress scheduler's rate holds for the whole node (issue 18 item 7): one node sends
10 MB to each of two peers at once with egress_rate_bytes_per_second 10 MB/s; prints how long
until both peers had them (about 2 s expected; a per-peer rate would take 1 s).
Usage: PYTHONPATH=build/python /usr/bin/python3 bench/egress_node_rate.py"""

import asyncio
import socket
import time

import torch

from wireless_comm import Comm, CommConfig, CommOptions, Peer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def main() -> None:
    hub_peer, p1, p2 = (Peer(n, "127.0.0.1", free_port()) for n in ("hub", "p1", "p2"))
    paced = CommConfig(transport="tcp", egress_quantum_bytes=65536, egress_rate_bytes_per_second=10_000_000)
    hub = await Comm.create(local=hub_peer, peers=[p1, p2], config=paced)
    a = await Comm.create(local=p1, peers=[hub_peer], config=CommConfig(transport="tcp"))
    b = await Comm.create(local=p2, peers=[hub_peer], config=CommConfig(transport="tcp"))
    t = torch.randint(0, 255, (10_000_000,), dtype=torch.uint8)
    for c, name in ((a, "p1"), (b, "p2")):  # connections first
        await hub.send("hi", hub.peer(name))
        await c.recv(c.peer("hub"))
    start = time.monotonic()
    ack = CommOptions(ack=True)
    await asyncio.gather(hub.send(t, hub.peer("p1"), options=ack), hub.send(t, hub.peer("p2"), options=ack),
                         a.recv(a.peer("hub")), b.recv(b.peer("hub")))
    print("2 x 10 MB at 10 MB/s for the node: %.2f s" % (time.monotonic() - start))
    for c in (hub, a, b):
        await c.close()


asyncio.run(main())
