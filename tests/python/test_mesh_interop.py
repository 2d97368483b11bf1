"""wireless_comm.mesh against a pyzmq mesh: the native C++ ZeroMQ communicator and the pure
pyzmq one exchange pickled messages both ways with pyzmq entities (tests/mesh/pyzmq_entity.py,
written from the wire description alone), over IPC and TCP."""
import pytest

from helpers import free_port
from mesh_util import PYZMQ_ENTITY, entity, finish, spawn, wait_ready
from wireless_comm.mesh import NativeZMQCommunicator, ZMQCommunicator, CommProtocol


def sample(i):  # what pyzmq_entity.py's sample(i) is
    return {"seq": i, "text": "h\u00e9llo", "blob": bytes([i % 256]) * 3, "pi": 3.25, "big": 2**40 + i,
            "neg": -7 - i, "tuple": (1, "a", None), "list": [True, False, None, 1.5], "u64": 2**63 + i,
            "nested": {"k": [1, {"x": b""}]}}


def tcp_env(monkeypatch):
    base = free_port()
    if base > 60000:
        base -= 5000
    monkeypatch.setenv("MSTAR_ZMQ_TCP_BASE_PORT", str(base))


@pytest.mark.parametrize("protocol", ["IPC", "TCP"])
@pytest.mark.parametrize("cls", [NativeZMQCommunicator, ZMQCommunicator])
def test_pyzmq_entity_and_wcomm_exchange_both_ways(tmp_path, monkeypatch, protocol, cls):
    tcp_env(monkeypatch)
    prefix = str(tmp_path / "ipc") + "/"
    n = 40
    me = cls("api_server", ["worker_0"], CommProtocol(protocol), prefix)
    try:
        py = spawn([PYZMQ_ENTITY, protocol, prefix, "worker_0", "api_server", "echo_then_send", str(n)])
        wait_ready(py)
        mine = [{"seq": i, "obj": ("tuple", i, [None, 2.5]), "b": bytes(i)} for i in range(n)]
        for m in mine:
            me.send("worker_0", m)
        echoes, originals = [], []
        while len(echoes) < n or len(originals) < n:
            got = me.get_all_new_messages(blocking=True, timeout_s=10)
            assert got, f"nothing within 10 s: {len(echoes)} echoes, {len(originals)} originals"
            for m in got:
                (echoes if "echo" in m else originals).append(m)
        assert [e["echo"] for e in echoes] == mine
        assert originals == [sample(i) for i in range(n)]
        me.send("worker_0", {"ok": n})
        code, out, err = finish(py)
        assert code == 0, err
        assert f"ok {n}" in out
    finally:
        me.close()


@pytest.mark.parametrize("protocol", ["IPC", "TCP"])
def test_native_entity_process_serves_a_pure_pyzmq_one(tmp_path, monkeypatch, protocol):
    """The other way round: the wcomm entity is the child process, the pyzmq one is here."""
    tcp_env(monkeypatch)
    prefix = str(tmp_path / "ipc") + "/"
    child = entity("native", protocol, prefix, "worker_3", "conductor", "echo", 20)
    wait_ready(child)
    me = ZMQCommunicator("conductor", ["worker_3"], CommProtocol(protocol), prefix)
    try:
        for i in range(20):
            me.send("worker_3", {"i": i, "s": "x" * i})
        got = []
        while len(got) < 20:
            more = me.get_all_new_messages(blocking=True, timeout_s=10)
            assert more, f"only {len(got)} replies"
            got += more
        assert got == [{"echo": {"i": i, "s": "x" * i}, "by": "worker_3"} for i in range(20)]
        me.send("worker_3", "bye")
        code, _, err = finish(child)
        assert code == 0, err
    finally:
        me.close()
