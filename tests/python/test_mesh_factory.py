"""make_communicator's choice (MSTAR_RUST_ZMQ / WCOMM_MESH_NATIVE, transport=, SHM), the
version warning, and the errors for bad input."""
import logging

import pytest

import wireless_comm.mesh as mesh
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


def test_wcomm_transport_by_name_or_shm(prefix):
    c = make_communicator("worker_0", [], ipc_socket_path_prefix=prefix, transport="wcomm")
    assert type(c) is WcommCommunicator
    c.close()
    c = make_communicator("worker_1", [], CommProtocol.SHM, prefix)
    assert type(c) is WcommCommunicator and c.endpoint.startswith("shm://")
    c.close()


def test_rdma_names_what_is_missing(prefix):
    with pytest.raises(ValueError, match="UCX"):
        make_communicator("worker_0", [], CommProtocol.RDMA, prefix, transport="wcomm")
    with pytest.raises(NotImplementedError):
        ZMQCommunicator("worker_0", [], CommProtocol.RDMA, prefix)


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
