#!/usr/bin/python3
"""p2p_local.py: two wireless_comm nodes in one asyncio program exchange a dict holding a torch
tensor, plus piggypayload metadata, over loopback TCP; node-b replies, and both print what
arrived.

    bash scripts/install-python.sh && /usr/bin/python3 examples/p2p_local.py
"""

import asyncio
import socket

import torch

from wireless_comm import Comm, CommOptions, Peer


def free_port() -> int:
    # Every node knows the whole directory, ports included, before it starts; real deployments
    # use fixed ports from YAML configs (configs/local-node-*.yaml).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def main() -> None:
    a = Peer("node-a", "127.0.0.1", free_port())
    b = Peer("node-b", "127.0.0.1", free_port())
    node_a = await Comm.create(local=a, peers=[b], bind_host="127.0.0.1")
    node_b = await Comm.create(local=b, peers=[a], bind_host="127.0.0.1")
    async with node_a, node_b:
        tensor = torch.arange(3 * 224 * 224, dtype=torch.float32).reshape(3, 224, 224)
        sent = await node_a.send(
            {"tensor": tensor, "label": "batch-1"},
            node_a.peer("node-b"),
            piggypayload={"trace_id": "request-42"},
            options=CommOptions(tag=1),
        )
        print(f"node-a sent message_id={sent.message_id} wire_bytes={sent.wire_bytes}")

        obj, piggy = await node_b.recv(node_b.peer("node-a"), CommOptions(tag=1, timeout=10))
        t = obj["tensor"]
        print(f"node-b got label={obj['label']!r} tensor={t.dtype} {tuple(t.shape)} "
              f"equal={torch.equal(t, tensor)} piggypayload={piggy}")

        await node_b.send({"ok": True, "sum": float(t.sum())}, node_b.peer("node-a"),
                          piggypayload={"trace_id": piggy["trace_id"]}, options=CommOptions(tag=1))
        reply, piggy = await node_a.recv(node_a.peer("node-b"), CommOptions(tag=1, timeout=10))
        print(f"node-a got reply={reply} piggypayload={piggy}")


if __name__ == "__main__":
    asyncio.run(main())
