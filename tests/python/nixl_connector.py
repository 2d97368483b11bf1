"""Seed 003's encoder-cache connector flow written against NIXL's Python API only (`nixl._api`),
as vLLM's connector is: the consumer allocates blocks of its registered region and requests an
item by key; the producer writes the item straight into those blocks and the transfer's
notification is the ack; the consumer probes. Control messages are NIXL notifications, metadata
goes through the listeners. Used by test_nixl_procs.py on both sides."""

from __future__ import annotations

import json
import time
from typing import Dict, List, Optional

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config


class Consumer:
    def __init__(self, name: str, port: int, backend: str, blocks: int, block_bytes: int) -> None:
        self.agent = nixl_agent(name, nixl_agent_config(enable_listen_thread=True, listen_port=port, backends=[backend]))
        self.region = np.zeros(blocks * block_bytes, np.uint8)
        self.block_bytes = block_bytes
        self.free = list(range(blocks))
        self.agent.register_memory(self.region)
        self.items: Dict[str, List[int]] = {}    # key -> its blocks, while requested
        self.ready: Dict[str, int] = {}          # key -> bytes, once acked
        self.failed: Dict[str, str] = {}

    def connect(self, producer: str, host: str, port: int, timeout: float = 20.0) -> None:
        # Ours first: an agent's listener requests go in the order made, so once the producer's
        # metadata is here, ours is there, and the producer can write to us at once.
        self.agent.send_local_metadata(host, port)
        self.agent.fetch_remote_metadata(producer, host, port)
        deadline = time.monotonic() + timeout
        while not self.agent.check_remote_metadata(producer):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no metadata of {producer} within {timeout} s: {self.agent.metadata_errors}")
            time.sleep(0.005)

    def request(self, producer: str, key: str, nbytes: int) -> None:
        n = -(-nbytes // self.block_bytes)
        blocks, self.free = self.free[:n], self.free[n:]
        base = self.region.__array_interface__["data"][0]
        descs = [(base + b * self.block_bytes, self.block_bytes, 0) for b in blocks]
        self.items[key] = blocks
        self.agent.send_notif(producer, b"REQ " + json.dumps({"key": key, "descs": descs}).encode())

    def probe(self, producer: str, key: str) -> Optional[bool]:
        """True when the item landed, None while in flight, False if unknown (or failed)."""
        for msg in self.agent.get_new_notifs().get(producer, []):
            kind, k, rest = msg.decode().split(" ", 2)
            if kind == "ACK":
                self.ready[k] = int(rest)
            else:
                self.failed[k] = rest
                self.free += self.items.pop(k, [])
        if key in self.ready:
            return True
        return None if key in self.items else False

    def read(self, key: str) -> bytes:
        b = self.block_bytes
        return b"".join(self.region[i * b:(i + 1) * b].tobytes() for i in self.items[key])[: self.ready[key]]


class Producer:
    def __init__(self, name: str, port: int, backend: str, block_bytes: int) -> None:
        self.agent = nixl_agent(name, nixl_agent_config(enable_listen_thread=True, listen_port=port, backends=[backend]))
        self.block_bytes = block_bytes
        self.items: Dict[str, np.ndarray] = {}
        self.parked: List[tuple] = []

    def publish(self, key: str, data: bytes) -> None:
        arr = np.frombuffer(bytearray(data), np.uint8)
        self.agent.register_memory(arr)
        self.items[key] = arr
        parked, self.parked = self.parked, []
        for consumer, req in parked:
            self.serve(consumer, req)

    def poll(self) -> None:
        for consumer, msgs in self.agent.get_new_notifs().items():
            for msg in msgs:
                if msg.startswith(b"REQ "):
                    self.serve(consumer, json.loads(msg[4:]))

    def serve(self, consumer: str, req: dict) -> None:
        arr = self.items.get(req["key"])
        if arr is None:
            self.parked.append((consumer, req))
            return
        n, b = arr.nbytes, self.block_bytes
        if n > b * len(req["descs"]):
            self.agent.send_notif(consumer, f"NAK {req['key']} the item has {n} bytes, more than the blocks".encode())
            return
        base = arr.__array_interface__["data"][0]
        local = [(base + i * b, min(b, n - i * b), 0) for i in range(-(-n // b))]
        remote = [(d[0], l[1], 0) for d, l in zip(req["descs"], local)]  # the last block may be partly used
        lh = self.agent.prep_xfer_dlist("NIXL_INIT_AGENT", local, "DRAM")
        rh = self.agent.prep_xfer_dlist(consumer, remote, "DRAM")
        idx = list(range(len(local)))
        h = self.agent.make_prepped_xfer("WRITE", lh, idx, rh, idx, f"ACK {req['key']} {n}".encode())
        state = self.agent.transfer(h)
        deadline = time.monotonic() + 20
        while state == "PROC" and time.monotonic() < deadline:
            state = self.agent.check_xfer_state(h)
        if state != "DONE":
            self.agent.send_notif(consumer, f"NAK {req['key']} transfer {state}".encode())
        self.agent.release_xfer_handle(h)
        self.agent.release_dlist_handle(lh)
        self.agent.release_dlist_handle(rh)
