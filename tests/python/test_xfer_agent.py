"""wireless_comm.xfer across real processes: a child agent exports its metadata, this process
writes into and reads from the child's memory (cma, ucx over tcp and shm); plus the shared
region's errors."""

from __future__ import annotations

import hashlib
import os
import subprocess

import numpy as np
import pytest

from helpers import PYTHON, finish, start
from wireless_comm import xfer

CHILD = r"""
import hashlib, sys
import numpy as np
from wireless_comm import xfer
agent = xfer.Agent("child", backend=sys.argv[1])
mem = (np.arange(8 << 20, dtype=np.uint64) * 2654435761 % 251).astype(np.uint8)
agent.register(mem)
print(agent.metadata().hex(), mem.__array_interface__["data"][0], flush=True)
for line in sys.stdin:
    off, n = map(int, line.split())
    if n == 0:
        break
    print(hashlib.sha256(mem[off:off + n].tobytes()).hexdigest(), flush=True)
"""

BACKENDS = [("cma", {}), ("ucx", {"UCX_TLS": "tcp"}), ("ucx", {"UCX_TLS": "posix,self"})]


def expected_child_memory() -> np.ndarray:
    return (np.arange(8 << 20, dtype=np.uint64) * 2654435761 % 251).astype(np.uint8)


@pytest.mark.parametrize("backend,env", BACKENDS, ids=["cma", "ucx_tcp", "ucx_shm"])
def test_write_and_read_another_process(backend, env, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    child = start([PYTHON, "-c", CHILD, backend], stdin=subprocess.PIPE)
    try:
        meta_hex, base = child.stdout.readline().split()
        base = int(base)
        agent = xfer.Agent("parent", backend=backend)
        local = np.random.default_rng(5).integers(0, 256, 3 << 20, dtype=np.uint8)
        agent.register(local)
        remote = agent.add_remote(bytes.fromhex(meta_hex))
        assert agent.backend_for(remote) == backend

        h = agent.post("write", xfer.descs_of(local, 0, 1 << 20), remote, [(base + 4096, 1 << 20, 0)])
        assert agent.wait(h, 20) == ("done", "")
        agent.release(h)
        child.stdin.write(f"4096 {1 << 20}\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == hashlib.sha256(local[: 1 << 20].tobytes()).hexdigest()

        h = agent.post("read", xfer.descs_of(local, 1 << 20, 2 << 20), remote, [(base + (4 << 20) + 100, 2 << 20, 0)])
        assert agent.wait(h, 20) == ("done", "")
        agent.release(h)
        assert np.array_equal(local[1 << 20: 3 << 20], expected_child_memory()[(4 << 20) + 100: (4 << 20) + 100 + (2 << 20)])

        with pytest.raises(ValueError, match="not inside memory agent 'child' registered"):
            agent.post("write", xfer.descs_of(local, 0, 10), remote, [(base + (8 << 20) - 5, 10, 0)])
        with pytest.raises(ValueError, match="'write' or 'read'"):
            agent.post("copy", xfer.descs_of(local, 0, 10), remote, [(base, 10, 0)])
        child.stdin.write("0 0\n")
        child.stdin.flush()
        code, _, err = finish(child)
        assert code == 0, err
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_shared_region_errors_and_join():
    name = f"wcomm-pytest-{os.getpid()}"
    region = xfer.SharedRegion.create(name, 4, 4096)
    assert os.path.exists(f"/dev/shm/{name}")
    joined = xfer.SharedRegion.join(name, 5)
    blocks = region.alloc(3)
    region.buffer()[blocks[0] * 4096] = 7
    assert joined.buffer()[blocks[0] * 4096] == 7
    from wireless_comm import BackpressureError
    with pytest.raises(BackpressureError, match="exhausted"):
        region.alloc(2)
    with pytest.raises(ValueError, match="block 9 is not in shared region"):
        region.free([9])
    region.free([blocks[0]])
    with pytest.raises(ValueError, match="double free"):
        region.free([blocks[0]])
    del joined, region
    import gc
    gc.collect()
    assert not os.path.exists(f"/dev/shm/{name}")


def test_capabilities_and_compat_hash():
    agent = xfer.Agent("caps")
    assert agent.capabilities("cma")["available"]
    tcp = agent.capabilities("tcp")
    assert not tcp["available"] and "Comm" in tcp["reason"]
    h = xfer.compat_hash("m", "float16", 4096)
    assert len(h) == 64 and h != xfer.compat_hash("m", "bfloat16", 4096)


def test_allocated_memory_is_registered():
    agent = xfer.Agent("alloc")
    view = agent.allocate(1 << 16)
    view[:4] = b"abcd"
    addr, n = xfer.address_of(view)
    assert n == 1 << 16 and (addr, n, 0) in agent.registered()
    agent.free(view)
    assert agent.registered() == []
