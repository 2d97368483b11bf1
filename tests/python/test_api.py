"""The V0.1 API surface: names, value classes and their validation, configs, the directory."""

import os

import pytest

import wireless_comm
from wireless_comm import (
    Comm,
    CommConfig,
    CommOptions,
    Peer,
    SendResult,
    _core,
    load_runtime_config,
)
from helpers import REPO, free_port, make_pair, run

V01_ERRORS = [
    "BackpressureError", "ConnectionClosedError", "ConnectionFailedError", "MessageTooLargeError",
    "OperationTimeoutError", "ProtocolError", "SerializationError", "UnknownCodecError",
    "UnsupportedPayloadError",
]


def test_v01_names_are_exported():
    for name in ["Comm", "CommConfig", "CommOptions", "Peer", "SendResult", "load_runtime_config"] + V01_ERRORS:
        assert hasattr(wireless_comm, name), name
    for name in V01_ERRORS:
        assert issubclass(getattr(wireless_comm, name), wireless_comm.CommError)
    # As in V0.1, not a TimeoutError (asyncio.TimeoutError is TimeoutError from 3.11): V0.1 code
    # reads `except asyncio.TimeoutError` around asyncio.wait_for as the outer wait's end.
    assert not issubclass(wireless_comm.OperationTimeoutError, TimeoutError)
    assert issubclass(wireless_comm.ConnectionClosedError, ConnectionError)


def test_value_classes():
    assert Peer("node-a", "127.0.0.1", 9000) == Peer(node_id="node-a", host="127.0.0.1", port=9000)
    assert CommOptions() == CommOptions(tag=0, timeout=None, wait_for_capacity=True)
    assert SendResult(message_id=1, wire_bytes=40).wire_bytes == 40
    for bad in [dict(node_id="", host="h", port=1), dict(node_id="n", host="h", port=70000),
                dict(node_id="n", host="h", port="9000"), dict(node_id="n", host="", port=1)]:
        with pytest.raises(ValueError):
            Peer(**bad)
    for bad in [dict(tag=-1), dict(tag=2**32), dict(timeout=0), dict(timeout=-1.0), dict(timeout=float("nan")),
                dict(wait_for_capacity=1), dict(tag=True)]:
        with pytest.raises(ValueError):
            CommOptions(**bad)


def test_comm_config_defaults_are_the_cores():
    assert CommConfig()._fields() == _core.default_config()


@pytest.mark.parametrize("fields, named", [
    (dict(max_message_bytes=0), "max_message_bytes"),
    (dict(max_manifest_bytes=300 << 20), "max_manifest_bytes"),
    (dict(max_metadata_bytes=8 << 20), "max_metadata_bytes"),
    (dict(max_segments=0), "max_segments"),
    (dict(max_container_depth=100000), "max_container_depth"),
    (dict(max_container_nodes=0), "max_container_nodes"),
    (dict(max_peer_queued_messages=0), "max_peer_queued_messages"),
    (dict(max_peer_queued_bytes=0), "max_peer_queued_bytes"),
    (dict(max_peer_queued_bytes=-5), "max_peer_queued_bytes"),
    (dict(max_peer_queued_bytes=1.5), "max_peer_queued_bytes"),
    (dict(max_segments=True), "max_segments"),
    (dict(allow_unsafe_pickle="yes"), "allow_unsafe_pickle"),
    (dict(tcp_nodelay=1), "tcp_nodelay"),
    (dict(egress_quantum_bytes=0), "egress_quantum_bytes"),
    (dict(egress_quantum_bytes=4096.0), "egress_quantum_bytes"),
    (dict(egress_burst_bytes=-1), "egress_burst_bytes"),
    (dict(egress_rate_bytes_per_second=1e6), "egress pacing requires egress_quantum_bytes"),
    (dict(egress_quantum_bytes=1024, egress_rate_bytes_per_second=1000.5), "egress_rate_bytes_per_second"),
    (dict(egress_burst_bytes=4096), "egress burst requires egress_quantum_bytes"),
    (dict(egress_quantum_bytes=4096, egress_burst_bytes=1024), "egress burst must be at least one quantum"),
    (dict(egress_rate_bytes_per_second=0), "egress_rate_bytes_per_second"),
    (dict(egress_rate_bytes_per_second=-1.0), "egress_rate_bytes_per_second"),
    (dict(egress_rate_bytes_per_second=float("inf")), "egress_rate_bytes_per_second"),
    (dict(egress_rate_bytes_per_second=1e6, egress_quantum_bytes=1 << 20, egress_burst_bytes=1024),
     "egress_burst_bytes"),
    (dict(connect_timeout_s=0), "connect_timeout_s"),
    (dict(recv_busy_poll_us=2_000_000), "recv_busy_poll_us"),
    (dict(recv_busy_poll_us=-1), "recv_busy_poll_us"),
])
def test_comm_config_validation_names_the_field(fields, named):
    with pytest.raises(ValueError, match=named):
        CommConfig(**fields)


def test_comm_config_accepts_every_v01_field():
    c = CommConfig(max_message_bytes=64 << 20, max_manifest_bytes=1 << 20, max_metadata_bytes=32 << 10,
                   max_segments=128, max_container_depth=16, max_container_nodes=1000,
                   max_peer_queued_messages=8, max_peer_queued_bytes=16 << 20, allow_unsafe_pickle=True,
                   tcp_nodelay=False, egress_quantum_bytes=64 << 10, egress_rate_bytes_per_second=10e6,
                   egress_burst_bytes=256 << 10)
    assert c.egress_rate_bytes_per_second == 10e6
    # V0.1's defaults: no pacing; a null burst is one quantum.
    assert CommConfig().egress_rate_bytes_per_second is None
    assert CommConfig().egress_quantum_bytes is None and CommConfig().egress_burst_bytes is None
    CommConfig(egress_quantum_bytes=16, egress_rate_bytes_per_second=2_500_000, egress_burst_bytes=None)


def test_load_runtime_config(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text("local:\n  node_id: node-a\n  host: 192.0.2.10\n  port: 9000\n  bind_host: 0.0.0.0\n"
                    "peers:\n  - node_id: node-b\n    host: 192.0.2.11\n    port: 9001\n"
                    "comm:\n  max_peer_queued_messages: 16\n  egress_rate_bytes_per_second: null\n")
    rc = load_runtime_config(path)
    assert rc.local == Peer("node-a", "192.0.2.10", 9000)
    assert rc.bind_host == "0.0.0.0"
    assert rc.peers == (Peer("node-b", "192.0.2.11", 9001),)
    assert rc.comm == CommConfig(max_peer_queued_messages=16)
    assert load_runtime_config(os.path.join(REPO, "configs", "local-node-a.yaml")).local.node_id == "node-a"


def test_load_runtime_config_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_runtime_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("local: {node_id: a, host: h, port: 1}\npeers: []\ncomm: {max_segmnts: 3}\n")
    with pytest.raises(ValueError, match="max_segmnts"):
        load_runtime_config(bad)
    bad.write_text("local: {node_id: a, host: h, port: 1}\npeers: []\ncomm: {max_segments: 0}\n")
    with pytest.raises(ValueError, match="max_segments"):
        load_runtime_config(bad)


def test_peer_directory():
    async def body():
        a, b = await make_pair()
        assert a.peer("node-b") == b.local
        assert [p.node_id for p in a.peers()] == ["node-b"]
        with pytest.raises(KeyError, match="node-x"):
            a.peer("node-x")
        with pytest.raises(ValueError, match="itself"):
            a.peer("node-a")  # the local node is not a peer (V0.1: ValueError)
        await a.close()
        await b.close()
    run(body())


def test_bad_specs_rejected():
    async def body():
        me = Peer("n", "127.0.0.1", 0)
        with pytest.raises(ValueError, match="local node"):
            await Comm.create(local=me, peers=[Peer("n", "127.0.0.1", 1)])
        with pytest.raises(ValueError, match="twice"):
            await Comm.create(local=me, peers=[Peer("x", "127.0.0.1", 1), Peer("x", "127.0.0.1", 2)])
        with pytest.raises(TypeError):
            await Comm.create(local=me, peers=[("x", "127.0.0.1", 1)])
        with pytest.raises(TypeError):
            Comm()
    run(body())


def test_port_zero_binds_an_ephemeral_port():
    async def body():
        comm = await Comm.create(local=Peer("solo", "127.0.0.1", 0), peers=[])
        assert comm.port > 0 and comm.local.port == comm.port
        await comm.close()
        await comm.close()  # idempotent
    run(body())


def test_bind_failure_is_connection_failed():
    async def body():
        port = free_port()
        first = await Comm.create(local=Peer("a", "127.0.0.1", port), peers=[])
        with pytest.raises(wireless_comm.ConnectionFailedError):
            await Comm.create(local=Peer("b", "127.0.0.1", port), peers=[])
        await first.close()
    run(body())


def test_type_stubs_describe_the_extension():
    import ast
    stub_path = os.path.join(os.path.dirname(wireless_comm.__file__), "_core.pyi")
    tree = ast.parse(open(stub_path).read())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef) and hasattr(_core, n.name)}
    assert {"Comm", "MeshCommunicator"} <= set(classes)
    assert set(classes) == {n for n in dir(_core) if isinstance(getattr(_core, n), type) and not n.startswith("_")
                            and not issubclass(getattr(_core, n), BaseException)}
    for name, cls in classes.items():  # every method (and attribute) of each extension class, stubbed
        stubbed = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)} - {"__init__"}
        stubbed |= {t.target.id for t in cls.body if isinstance(t, ast.AnnAssign)}
        assert stubbed == {n for n in dir(getattr(_core, name)) if not n.startswith("_")}, name
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert functions == {n for n in dir(_core) if not n.startswith("_") and callable(getattr(_core, n))} - set(classes)
    assert os.path.exists(os.path.join(os.path.dirname(wireless_comm.__file__), "py.typed"))
