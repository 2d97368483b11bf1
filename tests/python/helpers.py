"""Shared helpers for the wireless_comm tests: free ports, bounded asyncio runs, Comm pairs on
loopback, the C++ CLI's location, and a raw COMM v1 client for hand-made frames."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import subprocess
import sys
from typing import Any, Awaitable, List, Optional, Tuple

import msgpack

import wireless_comm
from wireless_comm import Comm, CommConfig, Peer

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEST_LIMIT_S = 60  # no test waits longer than this on anything


_handed_out: set = set()


def _bindable(*ports: int) -> bool:
    """Whether each port can be bound exclusively now (nobody holds, listens on or lingers on it)."""
    socks = []
    try:
        for port in ports:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    """A loopback port that was free a moment ago, never handed out before in this process, picked
    at random below the kernel's ephemeral range (32768-60999): the kernel never gives such a port
    to an outgoing connection, so it stays free for the node that binds it while parallel tests
    connect (a port from bind(0) can be taken in that gap)."""
    for port in random.sample(range(16384, 32768), 2000):
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    raise RuntimeError("no free loopback port between 16384 and 32767")


def free_port_pair() -> int:
    """P with P and P + 1 free (see free_port): under torchrun, rank 0's rendezvous listens on
    MASTER_PORT + 1."""
    for port in random.sample(range(16384, 32766, 2), 2000):
        if port not in _handed_out and port + 1 not in _handed_out and _bindable(port, port + 1):
            _handed_out.update((port, port + 1))
            return port
    raise RuntimeError("no two free loopback ports in a row between 16384 and 32767")


def run(coro: Awaitable[Any], timeout: float = TEST_LIMIT_S) -> Any:
    """Runs coro in a fresh event loop, failing the test if it takes longer than timeout."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def make_pair(config_a: Optional[CommConfig] = None, config_b: Optional[CommConfig] = None,
                    **kwargs: Any) -> Tuple[Comm, Comm]:
    """node-a and node-b on loopback, each knowing the other."""
    pa, pb = Peer("node-a", "127.0.0.1", free_port()), Peer("node-b", "127.0.0.1", free_port())
    a = await Comm.create(local=pa, peers=[pb], bind_host="127.0.0.1", config=config_a, **kwargs)
    b = await Comm.create(local=pb, peers=[pa], bind_host="127.0.0.1", config=config_b, **kwargs)
    return a, b


def child_env() -> dict:
    """Environment for child Python processes: the same wireless_comm this test imported."""
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(wireless_comm.__file__))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def wcomm_cli() -> Optional[str]:
    """The C++ `wcomm` executable: $WCOMM_CLI, else build/wcomm of this checkout."""
    path = os.environ.get("WCOMM_CLI") or os.path.join(REPO, "build", "wcomm")
    return path if os.access(path, os.X_OK) else None


PYTHON = sys.executable


def node_yaml(self_id: str, self_port: int, peer_id: str, peer_port: int) -> str:
    return (f"local:\n  node_id: {self_id}\n  host: 127.0.0.1\n  port: {self_port}\n"
            f"peers:\n  - node_id: {peer_id}\n    host: 127.0.0.1\n    port: {peer_port}\n")


# -- COMM v1 by hand (docs/wire-format.md) ---------------------------------------------------

HEADER = struct.Struct(">4sHBBIQIIQ")  # magic, version, kind, flags, tag, message_id, manifest, segments, payload
HELLO, HELLO_ACK, CLOSE, DATA = 1, 2, 3, 16


def frame(kind: int, manifest: dict, segments: List[bytes] = (), tag: int = 0, message_id: int = 0) -> bytes:
    m = msgpack.packb(manifest)
    payload = b"".join(segments)
    return HEADER.pack(b"COMM", 1, kind, 0, tag, message_id, len(m), len(segments), len(payload)) + m + payload


def hello(node_id: str, connection_id: str = "0" * 31 + "1") -> bytes:
    return frame(HELLO, {"control": {"node_id": node_id, "connection_id": connection_id}, "segments": []})


def tensor_frame(nbytes: int, message_id: int = 1, tag: int = 0) -> bytes:
    root = ["tensor", 0, nbytes, "uint8", [nbytes]]
    return frame(DATA, {"root": root, "piggypayload": None, "segments": [nbytes]}, [bytes(nbytes)], tag, message_id)


class RawClient:
    """A blocking TCP client (run it in a thread or between awaits; it has a 5 s timeout)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                break
            out += chunk
        return out

    def read_frame(self) -> Tuple[tuple, Any]:
        header = HEADER.unpack(self.read_exactly(HEADER.size))
        return header, msgpack.unpackb(self.read_exactly(header[6]))

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def close(self) -> None:
        self.sock.close()


CHILD_DEADLINE_S = 30  # how long a CLI child process may take


def start(argv: List[str], **kwargs: Any) -> subprocess.Popen:
    """A child process with this test's wireless_comm, its output captured as text."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                            **kwargs)


def finish(proc: subprocess.Popen, deadline_s: float = CHILD_DEADLINE_S) -> Tuple[int, str, str]:
    """(exit code, stdout, stderr) of proc, failing the test (and killing it) past the deadline."""
    import pytest
    try:
        out, err = proc.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{proc.args} did not finish within {deadline_s} s: {out}{err}")
    return proc.returncode, out, err


def write_node_pair(directory: str) -> Tuple[str, str]:
    """node-a.yaml and node-b.yaml in directory, each naming the other, on free ports. A
    benchmark responder also listens on its port + 1 (V0.1's load port): that one is free too,
    and neither node's port is the other's + 1."""
    while True:
        pa, pb = free_port(), free_port()
        if abs(pa - pb) > 1 and _bindable(pa + 1) and _bindable(pb + 1):
            break
    a, b = os.path.join(directory, "node-a.yaml"), os.path.join(directory, "node-b.yaml")
    with open(a, "w") as f:
        f.write(node_yaml("node-a", pa, "node-b", pb))
    with open(b, "w") as f:
        f.write(node_yaml("node-b", pb, "node-a", pa))
    return a, b
