"""make_communicator's choice (MSTAR_RUST_ZMQ / WCOMM_MESH_NATIVE, transport=, SHM, RDMA), the
version warning, and the errors for bad input."""
import logging

import pytest

import wireless_comm.mesh as mesh
from helpers import free_port_pair
from wireless_comm.mesh import (DEPLOYMENT_ANCHOR_ENTITY, CommProtocol, NativeZMQCommunicator, WcommCommunicator,
                                ZMQCommunicator, make_communicator, requested_transport)


@pytest.fixture
def prefix(tmp_path):
    return str(tmp_path / "ipc") + "/"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("MSTAR_RUST_ZMQ", "WCOMM_MESH_NATIVE", "MSTAR_ZMQ_TRANSPORT"):
        monkeypatch.delenv(name, raising=False)


def test_requested_transport(monkeypatch):
    assert requested_transport() == "AUTO"
    monkeypatch.setenv("WCOMM_MESH_NATIVE", "1")
    assert requested_transport() == "1"
    monkeypatch.setenv("MSTAR_RUST_ZMQ", "auto")
    assert requested_transport() == "AUTO"
    assert DEPLOYMENT_ANCHOR_ENTITY == "conductor"


@pytest.mark.parametrize("value,cls", [("AUTO", NativeZMQCommunicator), ("1", NativeZMQCommunicator),
                                       ("0", ZMQCommunicator)])
def test_choice_follows_the_environment(monkeypatch, prefix, value, cls):
    monkeypatch.setenv("MSTAR_RUST_ZMQ", value)
    c = make_communicator("worker_0", [], CommProtocol.IPC, prefix)
    assert type(c) is cls
    c.close()


def test_bad_value_is_named(monkeypatch, prefix):
    monkeypatch.setenv("MSTAR_RUST_ZMQ", "yes")
    with pytest.raises(ValueError, match="MSTAR_RUST_ZMQ='YES'"):
        make_communicator("worker_0", [], CommProtocol.IPC, prefix)


def test_an_empty_value_is_refused_as_in_mstar(monkeypatch, prefix):
    # Set but empty is not AUTO: mstar raises ValueError for it.
    monkeypatch.setenv("MSTAR_RUST_ZMQ", "")
    assert requested_transport() == ""
    with pytest.raises(ValueError, match="MSTAR_RUST_ZMQ=''"):
        make_communicator("worker_0", [], CommProtocol.IPC, prefix)


def test_wcomm_transport_by_name_or_shm(prefix):
    c = make_communicator("worker_0", [], ipc_socket_path_prefix=prefix, transport="wcomm")
    assert type(c) is WcommCommunicator
    c.close()
    c = make_communicator("worker_1", [], CommProtocol.SHM, prefix)
    assert type(c) is WcommCommunicator and c.endpoint.startswith("shm://")
    c.close()


def test_rdma_is_the_wcomm_transport_over_ucx(monkeypatch, prefix):
    monkeypatch.setenv("WCOMM_MESH_RDMA_BASE_PORT", str(free_port_pair() - 100))  # worker_0, worker_1
    a = make_communicator("worker_0", ["worker_1"], CommProtocol.RDMA, prefix)
    b = make_communicator("worker_1", ["worker_0"], protocol=CommProtocol.RDMA, ipc_socket_path_prefix=prefix)
    try:
        assert type(a) is WcommCommunicator and a.endpoint.startswith("ucx://127.0.0.1:")
        a.send("worker_1", {"n": 1, "blob": b"x" * (1 << 20)})
        b.send("worker_0", ("back", 2))
        assert b.get_all_new_messages(blocking=True, timeout_s=20) == [{"n": 1, "blob": b"x" * (1 << 20)}]
        assert a.get_all_new_messages(blocking=True, timeout_s=20) == [("back", 2)]
    finally:
        a.close()
        b.close()


def test_zeromq_refuses_rdma(prefix):
    with pytest.raises(NotImplementedError, match="no RDMA transport.*wcomm transport serves SHM and RDMA"):
        ZMQCommunicator("worker_0", [], CommProtocol.RDMA, prefix)
    with pytest.raises(NotImplementedError, match="no RDMA transport"):
        make_communicator("worker_0", [], CommProtocol.RDMA, prefix, transport="zmq")


def test_version_mismatch_warns(monkeypatch, prefix, caplog):
    monkeypatch.setattr(mesh, "EXPECTED_MESH_VERSION", "9.9.9")
    with caplog.at_level(logging.WARNING, logger="wireless_comm.mesh"):
        c = make_communicator("worker_0", [], CommProtocol.IPC, prefix)
    c.close()
    assert "expects 9.9.9" in caplog.text


def test_transport_override_and_ipc_path(monkeypatch, prefix):
    c = make_communicator("worker_0", [], CommProtocol.IPC, prefix)
    assert c.endpoint == f"ipc://{prefix}/worker_0.ipc"
    c.close()
    monkeypatch.setenv("MSTAR_ZMQ_TRANSPORT", "udp")
    with pytest.raises(ValueError, match="MSTAR_ZMQ_TRANSPORT"):
        make_communicator("worker_0", [], CommProtocol.IPC, prefix)


def test_custom_codec(prefix):
    class Json:
        @staticmethod
        def encode(obj):
            import json
            return json.dumps(obj).encode()

        @staticmethod
        def decode(data):
            import json
            return json.loads(data)

    a = make_communicator("worker_0", ["worker_1"], CommProtocol.IPC, prefix, codec=Json)
    b = make_communicator("worker_1", [], CommProtocol.IPC, prefix, codec=Json)
    a.send("worker_1", {"k": [1, 2]})
    assert b.get_all_new_messages(blocking=True, timeout_s=10) == [{"k": [1, 2]}]
    a.close()
    b.close()
