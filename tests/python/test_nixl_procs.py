"""wireless_comm.nixl across processes, with the child written against `nixl._api` and run
through the alias: metadata through the listeners, WRITE / READ with notifications, and seed
003's connector flow (nixl_connector.py) on cma and ucx. Plus the alias's own rules."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time

import numpy as np
import pytest

from helpers import PYTHON, child_env, finish, free_port, start
from wireless_comm.nixl import install_alias

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "nixl_peer.py")
BACKENDS = [("cma", {}), ("ucx", {"UCX_TLS": "tcp"}), ("UCX", {}), ("tcp", {})]
LIMIT_S = 20


def alias_run(*args: str, **kw) -> subprocess.Popen:
    return start([PYTHON, "-m", "wireless_comm.nixl.alias", PEER, *args], **kw)


def stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.kill()
        child.wait()


def until(cond, what: str, limit: float = LIMIT_S):
    deadline = time.monotonic() + limit
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {limit} s")
        time.sleep(0.002)


@pytest.fixture(scope="module")
def nixl_api():
    if not install_alias():
        pytest.skip("a real NIXL is installed: these tests run wcomm's surface under the name nixl")
    import nixl._api
    return nixl._api


def test_alias_never_hides_a_real_nixl(tmp_path):
    code = ("import wireless_comm.nixl as w; print(w.install_alias(), w.install_alias());"
            "import nixl._api, nixl._bindings, nixl._utils; from nixl import _api;"
            "print(nixl._api.nixl_agent is w.nixl_agent, nixl._bindings.DRAM_SEG == 0)")
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=LIMIT_S, env=child_env())
    assert out.stdout.split() == ["True", "True", "True", "True"], out.stderr
    (tmp_path / "nixl").mkdir()  # a "real" NIXL on the path
    (tmp_path / "nixl" / "__init__.py").write_text("REAL = True\n")
    env = child_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    code = "import wireless_comm.nixl as w; ok = w.install_alias(); import nixl; print(ok, nixl.REAL)"
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=LIMIT_S, env=env)
    assert out.stdout.split() == ["False", "True"], out.stderr


@pytest.mark.parametrize("backend,env", BACKENDS, ids=[b[0] + ("_tcp" if b[1] else "") for b in BACKENDS])
def test_two_processes_listener_write_read_notifications(backend, env, monkeypatch, nixl_api):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    tport, iport = free_port(), free_port()
    child = alias_run("target", backend, str(tport))
    agent = None
    try:
        ready, base = child.stdout.readline().split()
        base = int(base)
        agent = nixl_api.nixl_agent("initiator", nixl_api.nixl_agent_config(
            enable_listen_thread=True, listen_port=iport, backends=[backend], capture_telemetry=True))
        local = np.random.default_rng(3).integers(0, 256, 1 << 20, dtype=np.uint8)
        agent.register_memory(local)
        # Ours first, so the target can notify us back: requests go in the order made, so ours
        # is there once the target's is here.
        agent.send_local_metadata("127.0.0.1", tport)
        agent.fetch_remote_metadata("target", "127.0.0.1", tport)
        until(lambda: agent.check_remote_metadata("target"), "no metadata from the target")

        lh = agent.prep_xfer_dlist("NIXL_INIT_AGENT", [(local.ctypes.data + i * 4096, 4096, 0) for i in range(256)],
                                   "DRAM")
        rh = agent.prep_xfer_dlist("target", [(base + i * 4096, 4096, 0) for i in range(256)], "DRAM")
        n = 64 * 4096
        h = agent.make_prepped_xfer("WRITE", lh, list(range(64)), rh, list(range(64)), notif_msg=f"written {n}")
        agent.transfer(h)
        assert agent.wait_xfer(h, LIMIT_S) == "DONE", agent.get_xfer_error(h)
        t = agent.get_xfer_telemetry(h)
        assert t.totalBytes == n and t.descCount == 1  # 64 contiguous blocks merged into one
        expect = b"sha " + hashlib.sha256(local[:n].tobytes()).hexdigest().encode()
        until(lambda: agent.check_remote_xfer_done("target", expect), "no sha notification from the target")

        h2 = agent.make_prepped_xfer("READ", lh, list(range(128, 192)), rh, list(range(128, 192)))
        agent.transfer(h2)
        assert agent.wait_xfer(h2, LIMIT_S) == "DONE", agent.get_xfer_error(h2)
        pattern = (np.arange(1 << 20) * 7 % 253).astype(np.uint8)
        assert np.array_equal(local[128 * 4096:192 * 4096], pattern[128 * 4096:192 * 4096])
        for x in (h, h2):
            agent.release_xfer_handle(x)
        agent.release_dlist_handle(lh)
        agent.release_dlist_handle(rh)
        agent.send_notif("target", b"bye")
        code, _, err = finish(child, LIMIT_S)
        assert code == 0, err
    finally:
        stop(child)
        if agent is not None:
            agent.close()


@pytest.mark.parametrize("backend,env", [BACKENDS[0], BACKENDS[1], BACKENDS[3]], ids=["cma", "ucx_tcp", "tcp"])
def test_seed_003_connector_flow(backend, env, monkeypatch, nixl_api):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    from nixl_connector import Consumer
    pport = free_port()
    child = alias_run("producer", backend, str(pport), stdin=subprocess.PIPE)
    consumer = None
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        consumer = Consumer("consumer", free_port(), backend, blocks=16, block_bytes=4096)
        consumer.connect("producer", "127.0.0.1", pport)
        n = 256 * 40  # 10 KiB: three blocks, the last one partly used
        consumer.request("producer", "k", n)
        assert consumer.probe("producer", "k") is None
        assert consumer.probe("producer", "other") is False

        def parked() -> bool:
            child.stdin.write("parked\n")
            child.stdin.flush()
            return child.stdout.readline().strip() == "1"
        until(parked, "the producer did not park the request")
        child.stdin.write("publish k 40\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "published"
        until(lambda: consumer.probe("producer", "k"), "the item did not land")
        assert consumer.read("k") == bytes(range(256)) * 40

        consumer.request("producer", "big", 17 * 4096)  # more than the 13 blocks left: the producer refuses
        child.stdin.write("publish big 272\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "published"
        until(lambda: consumer.probe("producer", "big") is False, "no refusal for an item larger than its blocks")
        assert "more than the blocks" in consumer.failed["big"]
        child.stdin.write("exit\n")
        child.stdin.flush()
        code, _, err = finish(child, LIMIT_S)
        assert code == 0, err
    finally:
        stop(child)
        if consumer is not None:
            consumer.agent.close()
