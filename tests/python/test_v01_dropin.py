"""wireless_comm as a drop-in for V0.1: programs and command lines written from the original
V0.1 package's README run unchanged, print V0.1's lines, exit with V0.1's codes and raise
V0.1's exception classes. Every process and wait is bounded; loopback and ephemeral ports only.
"""

import asyncio
import dataclasses
import inspect
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import yaml

import wireless_comm
from wireless_comm import (
    BackpressureError,
    Comm,
    CommConfig,
    CommOptions,
    MessageTooLargeError,
    Peer,
    SerializationError,
    UnknownCodecError,
    UnsupportedPayloadError,
    load_runtime_config,
)
from helpers import PYTHON, REPO, child_env, finish, free_port, make_pair, node_yaml, run, start, wcomm_cli

DEADLINE_S = 30

# V0.1's CommConfig fields: what its config loader accepts under `comm:`.
V01_COMM_KEYS = {
    "max_message_bytes", "max_manifest_bytes", "max_metadata_bytes", "max_segments", "max_container_depth",
    "max_container_nodes", "max_peer_queued_messages", "max_peer_queued_bytes", "allow_unsafe_pickle",
    "tcp_nodelay", "egress_quantum_bytes", "egress_rate_bytes_per_second", "egress_burst_bytes",
}


# -- running things -----------------------------------------------------------------------------




def run_script(tmp_path, source, *args):
    """Runs a V0.1-style program as its own process; returns (rc, stdout, stderr)."""
    path = tmp_path / "v01_program.py"
    path.write_text(textwrap.dedent(source))
    return finish(start([PYTHON, str(path), *map(str, args)]))


def node(config, *args):
    """`python -m wireless_comm.node` exactly as V0.1's README spells it."""
    return [PYTHON, "-m", "wireless_comm.node", "--config", config, *args]


def wait_listening(port, proc):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "the node did not start listening"
            time.sleep(0.02)


@pytest.fixture
def configs(tmp_path):
    """configs/local-node-a.yaml and -b.yaml as V0.1 ships them, on free ports."""
    pa, pb = free_port(), free_port()
    a, b = tmp_path / "local-node-a.yaml", tmp_path / "local-node-b.yaml"
    for path in (a, b):
        text = open(os.path.join(REPO, "configs", path.name)).read()
        path.write_text(text.replace("9201", str(pa)).replace("9202", str(pb)))
    assert load_runtime_config(a).local.port == pa and load_runtime_config(b).local.port == pb
    return str(a), str(b)


# -- the P2P API, as V0.1 programs use it --------------------------------------------------------

P2P_PROGRAM = """
    import asyncio, sys
    import torch
    from wireless_comm import Comm, CommOptions, Peer

    async def main(port_a, port_b):
        local = Peer("node-a", "127.0.0.1", port_a)
        remote = Peer("node-b", "127.0.0.1", port_b)
        comm = await Comm.create(local=local, peers=[remote], bind_host="127.0.0.1")
        other = await Comm.create(local=remote, peers=[local], bind_host="127.0.0.1")
        contiguous_cpu_tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4)

        await comm.send(
            {"tensor": contiguous_cpu_tensor},
            comm.peer("node-b"),
            piggypayload={"trace_id": "request-42"},
            options=CommOptions(tag=1),
        )
        object, piggypayload = await other.recv(
            other.peer("node-a"),
            CommOptions(tag=1),
        )
        print("tensor", object["tensor"].tolist() == contiguous_cpu_tensor.tolist(), object["tensor"].dtype)
        print("piggypayload", piggypayload)
        # V0.1's keyword names.
        await other.send(object=b"pong", dst=other.peer("node-a"), piggypayload=None,
                         options=CommOptions(tag=2))
        got = await comm.recv(src=comm.peer("node-b"), options=CommOptions(tag=2, timeout=10))
        print("reply", got)
        print("peers", type(comm.peers()).__name__, [p.node_id for p in comm.peers()])
        await comm.close()
        await other.close()

    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


def test_readme_p2p_program_runs_unchanged(tmp_path):
    rc, out, err = run_script(tmp_path, P2P_PROGRAM, free_port(), free_port())
    assert rc == 0, err
    assert out.splitlines() == [
        "tensor True torch.float32",
        "piggypayload {'trace_id': 'request-42'}",
        "reply (b'pong', None)",
        "peers tuple ['node-b']",
    ]


BACKPRESSURE_PROGRAM = """
    import asyncio, sys
    from wireless_comm import BackpressureError, Comm, CommConfig, CommOptions, Peer

    async def main(port_a, port_b):
        # Nobody listens at node-b: sends stay queued while node-a dials.
        comm = await Comm.create(local=Peer("node-a", "127.0.0.1", port_a),
                                 peers=[Peer("node-b", "127.0.0.1", port_b)],
                                 config=CommConfig(max_peer_queued_messages=1, max_peer_queued_bytes=1 << 20))
        peer = comm.peer("node-b")
        queued = asyncio.create_task(comm.send("first", peer))
        await asyncio.sleep(0)
        try:
            await comm.send("payload", peer, options=CommOptions(wait_for_capacity=False))
        except BackpressureError as e:
            print("full queue: BackpressureError")
        try:
            await comm.send(b"x" * (2 << 20), peer)
        except BackpressureError as e:
            print("too big for the queue: BackpressureError")
        queued.cancel()
        await comm.close()

    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


def test_readme_backpressure_program(tmp_path):
    rc, out, err = run_script(tmp_path, BACKPRESSURE_PROGRAM, free_port(), free_port())
    assert rc == 0, err
    assert out.splitlines() == ["full queue: BackpressureError", "too big for the queue: BackpressureError"]


def test_exception_classes_as_v01():
    for name in ("UnsupportedPayloadError", "UnknownCodecError"):
        assert issubclass(getattr(wireless_comm, name), SerializationError), name
    # The classes that are both V0.1's and wcomm's precise one.
    assert issubclass(wireless_comm.QueueOverflowError, BackpressureError)
    assert issubclass(wireless_comm.QueueOverflowError, MessageTooLargeError)
    assert issubclass(wireless_comm.PiggypayloadTooLargeError, SerializationError)
    assert issubclass(wireless_comm.PiggypayloadTooLargeError, MessageTooLargeError)


def test_failures_raise_v01_classes():
    async def body():
        a, b = await make_pair(CommConfig(max_metadata_bytes=1024, max_peer_queued_bytes=1 << 20))
        dst = a.peer("node-b")
        with pytest.raises(SerializationError, match="max_metadata_bytes") as info:
            await a.send("x", dst, piggypayload={"blob": "y" * 4096})
        assert isinstance(info.value, MessageTooLargeError)
        with pytest.raises(BackpressureError, match="max_peer_queued_bytes") as info:
            await a.send(torch.zeros(2 << 20, dtype=torch.uint8), dst)
        assert isinstance(info.value, MessageTooLargeError)
        # Unregistered arbitrary objects need allow_unsafe_pickle: a SerializationError too.
        with pytest.raises(SerializationError):
            await a.send(object(), dst)
        with pytest.raises(UnsupportedPayloadError):
            await a.send(object(), dst)
        # The connection is still good.
        await a.send("ok", dst)
        assert (await b.recv(b.peer("node-a")))[0] == "ok"
        await a.close()
        await b.close()
    run(body())


@dataclasses.dataclass
class Sample:
    name: str
    value: int


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


def test_registration_as_v01():
    async def body():
        a, b = await make_pair()
        # register_codec's version defaults to 1; encoder and decoder come before it.
        for comm in (a, b):
            comm.register_codec(Point, "tests.Point", lambda p: [p.x, p.y], lambda v: Point(*v))
            comm.register_dataclass(Sample, "tests.Sample")
        assert "tests.Point" in a.registry and Sample in a.registry
        # A type_id registered twice is a ValueError, whatever the class.
        with pytest.raises(ValueError, match="already registered"):
            a.register_dataclass(Sample, "tests.Sample")
        with pytest.raises(ValueError, match="already registered"):
            a.registry.register_codec(dict, "tests.Point", lambda p: p, lambda v: v)
        await a.send([Point(1, 2), Sample("s", 3)], a.peer("node-b"))
        got, _ = await b.recv(b.peer("node-a"))
        assert (got[0].x, got[0].y) == (1, 2) and got[1] == Sample("s", 3)
        await a.close()
        await b.close()
    run(body())


def test_unknown_type_id_is_a_serialization_error():
    async def body():
        a, b = await make_pair()
        a.register_dataclass(Sample, "tests.Sample")
        await a.send(Sample("s", 1), a.peer("node-b"))
        with pytest.raises(SerializationError) as info:
            await b.recv(b.peer("node-a"))
        assert isinstance(info.value, UnknownCodecError)
        await a.close()
        await b.close()
    run(body())


def test_signatures_and_names_as_v01():
    assert list(inspect.signature(Comm.send).parameters) == ["self", "object", "dst", "piggypayload", "options"]
    assert inspect.signature(Comm.send).parameters["piggypayload"].default is None
    assert inspect.signature(Comm.send).parameters["options"].default is None
    assert list(inspect.signature(Comm.recv).parameters) == ["self", "src", "options"]
    assert inspect.signature(Comm.register_codec).parameters["version"].default == 1
    assert inspect.signature(Comm.register_dataclass).parameters["version"].default == 1
    for name in ("Metadata", "Object", "Comm", "CommConfig", "CommOptions", "Peer", "BackpressureError"):
        assert hasattr(wireless_comm, name), name


def test_directory_as_v01():
    async def body():
        a, b = await make_pair()
        assert a.peers() == (b.local,)
        with pytest.raises(ValueError):
            a.peer("node-a")  # its own node_id
        with pytest.raises(KeyError):
            a.peer("node-x")
        await a.close()
        await b.close()
    run(body())


def test_remote_peer_needs_a_port():
    async def body():
        with pytest.raises(ValueError, match="port 0"):
            await Comm.create(local=Peer("node-a", "127.0.0.1", 0), peers=[Peer("node-b", "127.0.0.1", 0)])
        port = free_port()
        with pytest.raises(ValueError, match="same address"):
            await Comm.create(local=Peer("node-a", "127.0.0.1", port), peers=[Peer("node-b", "127.0.0.1", port)])
    run(body())


# -- configuration -------------------------------------------------------------------------------


def test_egress_defaults_and_null_as_v01(tmp_path):
    c = CommConfig()
    assert (c.egress_quantum_bytes, c.egress_rate_bytes_per_second, c.egress_burst_bytes) == (None, None, None)
    path = tmp_path / "node.yaml"
    path.write_text(node_yaml("node-a", free_port(), "node-b", free_port()) +
                    "comm:\n  egress_quantum_bytes: null\n  egress_rate_bytes_per_second: null\n"
                    "  egress_burst_bytes: null\n")
    assert load_runtime_config(path).comm == CommConfig()
    path.write_text(node_yaml("node-a", free_port(), "node-b", free_port()) +
                    "comm:\n  egress_quantum_bytes: 16\n  egress_rate_bytes_per_second: 2500000\n")
    comm = load_runtime_config(path).comm
    assert comm.egress_quantum_bytes == 16 and comm.egress_burst_bytes == 16  # null burst: one quantum


@pytest.mark.parametrize("comm, words", [
    ("egress_rate_bytes_per_second: 2500000", "egress pacing requires egress_quantum_bytes"),
    ("egress_burst_bytes: 65536", "egress burst requires egress_quantum_bytes"),
    ("{egress_quantum_bytes: 65536, egress_burst_bytes: 1024}", "egress burst must be at least one quantum"),
    ("egress_quantum_bytes: 0", "egress_quantum_bytes must be positive when configured"),
    ("{egress_quantum_bytes: 16, egress_rate_bytes_per_second: 0.5}",
     "egress_rate_bytes_per_second must be positive when configured"),
    ("recv_busy_poll_usec: 5", "unknown fields in comm: recv_busy_poll_usec"),
])
def test_config_errors_keep_v01_words(tmp_path, comm, words):
    path = tmp_path / "node.yaml"
    body = comm if comm.startswith("{") else "{" + comm + "}"
    path.write_text(node_yaml("node-a", free_port(), "node-b", free_port()) + f"comm: {body}\n")
    with pytest.raises(ValueError, match=words):
        load_runtime_config(path)


@pytest.mark.parametrize("local,peers,words", [
    ("node-a", "{node_id: node-b, host: 127.0.0.1, port: 9202}, {node_id: node-b, host: 127.0.0.1, port: 9203}",
     "duplicate node_id"),
    ("node-a", "{node_id: node-b, host: 127.0.0.1, port: 9201}", "same address as the local node"),
    # A peer that names the local node: V0.1's words ("duplicate node_id") inside the better message.
    ("node-a", "{node_id: node-a, host: 127.0.0.1, port: 9202}",
     "duplicate node_id 'node-a': it is the local node's own node_id"),
    # V0.1 wants node_id as a string.
    ("123", "{node_id: node-b, host: 127.0.0.1, port: 9202}", "local.node_id: expected a string, got the number 123"),
])
def test_directory_config_errors_keep_v01_words(tmp_path, local, peers, words):
    path = tmp_path / "node.yaml"
    path.write_text(f"local: {{node_id: {local}, host: 127.0.0.1, port: 9201}}\npeers: [{peers}]\n")
    with pytest.raises(ValueError, match=words):
        load_runtime_config(path)


def test_a_config_error_quoting_bytes_that_are_not_utf8_says_what_is_wrong(tmp_path):
    # It raised ValueError('') (the message quoted the file's bytes, not valid UTF-8).
    path = tmp_path / "node.yaml"
    path.write_bytes(b"local: {node_id: node-a, host: 127.0.0.1, port: \xff}\n"
                     b"peers: [{node_id: node-b, host: 127.0.0.1, port: 9202}]\n")
    with pytest.raises(ValueError) as raised:
        load_runtime_config(path)
    assert str(path) in str(raised.value) and "local.port" in str(raised.value) and "\\xff" in str(raised.value)
    path.write_text("local: {node_id: node-a, host: 127.0.0.1, port: 9201}\npeers: []\nextra: 1\n")
    with pytest.raises(ValueError, match="unknown fields in configuration: extra"):
        load_runtime_config(path)


SHIPPED_NODE_CONFIGS = ["local-node-a.yaml", "local-node-b.yaml", "node-a.yaml", "node-b.yaml",
                        "agx-thor-wifi.yaml", "agx-orin-wifi.yaml"]


@pytest.mark.parametrize("name", SHIPPED_NODE_CONFIGS)
def test_shipped_v01_configs_hold_only_v01_keys(name):
    """V0.1 refuses keys it does not know, so the examples it names keep wcomm's out."""
    doc = yaml.safe_load(open(os.path.join(REPO, "configs", name)))
    assert set(doc) <= {"local", "peers", "comm"}
    assert set(doc["local"]) <= {"node_id", "host", "port", "bind_host"}
    for peer in doc["peers"]:
        assert set(peer) == {"node_id", "host", "port"}
    assert set(doc.get("comm") or {}) <= V01_COMM_KEYS
    load_runtime_config(os.path.join(REPO, "configs", name))


def test_shipped_examples_are_v01s():
    a = load_runtime_config(os.path.join(REPO, "configs", "local-node-a.yaml"))
    b = load_runtime_config(os.path.join(REPO, "configs", "local-node-b.yaml"))
    assert (a.local.port, b.local.port) == (9201, 9202)
    assert a.peers == (b.local,) and b.peers == (a.local,)
    thor = load_runtime_config(os.path.join(REPO, "configs", "agx-thor-wifi.yaml"))
    orin = load_runtime_config(os.path.join(REPO, "configs", "agx-orin-wifi.yaml"))
    assert (thor.local.node_id, orin.local.node_id) == ("agx-thor", "agx-orin")
    assert thor.peers == (orin.local,) and orin.peers == (thor.local,)
    # The cluster example: V0.1's schema (its cluster design, section 2.1).
    cluster = yaml.safe_load(open(os.path.join(REPO, "configs", "cluster-four-node.example.yaml")))
    assert set(cluster) == {"controller", "base_port", "nodes", "ring", "benchmark", "comm"}
    assert len(cluster["nodes"]) == 4
    for n in cluster["nodes"]:
        assert {"node_id", "host", "ranks", "ssh_alias", "interface"} <= set(n)
        assert set(n) <= {"node_id", "host", "ranks", "ssh_alias", "interface", "bind_host", "python", "workdir"}
    ranks = sorted(r for n in cluster["nodes"] for r in n["ranks"])
    assert ranks == list(range(len(ranks))) and sorted(cluster["ring"]) == ranks
    controller = next(n for n in cluster["nodes"] if n["node_id"] == cluster["controller"])
    assert 0 in controller["ranks"]
    assert [n["ssh_alias"] for n in cluster["nodes"]] == ["AgxOrin", "AgxThor", "WifiNodeC", "WifiNodeD"]


# -- python -m wireless_comm.node, as V0.1's README runs it ----------------------------------------


def echo_and_send(a, b, send_args, echo_args=("echo", "--src", "node-a", "--tag", "1", "--count", "1")):
    server = start(node(b, *echo_args))
    wait_listening(load_runtime_config(b).local.port, server)
    client = start(node(a, *send_args))
    rc, out, err = finish(client)
    src, sout, serr = finish(server)
    assert rc == 0, err
    assert src == 0, serr
    return out, sout


def test_readme_echo_and_send(configs):
    a, b = configs
    # The README's two commands, word for word (only the config paths differ).
    out, sout = echo_and_send(a, b, ["send", "--dst", "node-b", "--tag", "1", "--json", '{"message":"hello"}',
                                     "--metadata", '{"trace_id":"wifi-test-1"}', "--expect-reply"])
    line = "object={'message': 'hello'} piggypayload={'trace_id': 'wifi-test-1'}"
    assert f"received {line}" in out.splitlines()
    assert f"received {line}" in sout.splitlines()


def test_readme_tensor_send(configs):
    a, b = configs
    server = start(node(b, "recv", "--src", "node-a", "--count", "1"))
    wait_listening(load_runtime_config(b).local.port, server)
    rc, out, err = finish(start(node(a, "send", "--dst", "node-b", "--tensor-shape", "3,224,224",
                                      "--tensor-dtype", "float32")))
    assert rc == 0, err
    src, sout, serr = finish(server)
    assert src == 0, serr
    assert sout == "received object=Tensor(shape=(3, 224, 224), dtype=torch.float32) piggypayload=None\n"


def test_generated_tensor_holds_arange(configs):
    """V0.1's generated tensor is torch.arange(numel) in the shape and dtype asked for."""
    a, b = configs

    async def body():
        rc = load_runtime_config(b)
        comm = await Comm.create(local=rc.local, peers=rc.peers, bind_host=rc.bind_host)
        sender = start(node(a, "send", "--dst", "node-b", "--tensor-shape", "3,224,224"))
        got, piggy = await comm.recv(comm.peer("node-a"), CommOptions(timeout=20))
        await comm.close()
        return sender, got, piggy

    sender, got, piggy = run(body())
    assert finish(sender)[0] == 0
    assert piggy is None
    assert torch.equal(got, torch.arange(3 * 224 * 224, dtype=torch.float32).reshape(3, 224, 224))


@pytest.mark.parametrize("alias, dtype", [("half", torch.float16), ("double", torch.float64),
                                          ("long", torch.int64), ("int", torch.int32), ("float", torch.float32),
                                          ("torch.bfloat16", torch.bfloat16)])
def test_torch_dtype_aliases(configs, alias, dtype):
    a, b = configs

    async def body():
        rc = load_runtime_config(b)
        comm = await Comm.create(local=rc.local, peers=rc.peers, bind_host=rc.bind_host)
        sender = start(node(a, "send", "--dst", "node-b", "--tensor-shape", "4,5", "--tensor-dtype", alias))
        got, _ = await comm.recv(comm.peer("node-a"), CommOptions(timeout=20))
        await comm.close()
        return sender, got

    sender, got = run(body())
    rc, out, err = finish(sender)
    assert rc == 0, err
    assert got.dtype == dtype and torch.equal(got, torch.arange(20, dtype=dtype).reshape(4, 5))
    assert out == f"sent object=Tensor(shape=(4, 5), dtype={dtype}) piggypayload=None\n"


def test_bytes_are_printed_by_length(configs, tmp_path):
    a, b = configs
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(1000))
    _, sout = echo_and_send(a, b, ["send", "--dst", "node-b", "--tag", "1", "--file", str(blob), "--expect-reply"])
    assert sout.splitlines()[0] == "received object=bytes(length=1000) piggypayload=None"


@pytest.mark.parametrize("args", [
    ["recv", "--src", "node-a", "--count", "-1"],
    ["echo", "--src", "node-a", "--count", "-1"],
    ["send", "--dst", "node-b"] + ["--tag", "x"],
])
def test_malformed_command_lines_exit_2(configs, args):
    _, b = configs
    rc, _, err = finish(start(node(b, *args)))
    assert rc == 2, err


def test_config_errors_exit_1(tmp_path):
    bad = tmp_path / "bad.yaml"
    port = free_port()
    for text, words in [
        (node_yaml("node-a", port, "node-b", port + 1) + "comm: {egress_rate_bytes_per_second: 1000}\n",
         "egress pacing requires egress_quantum_bytes"),
        (node_yaml("node-a", port, "node-b", port + 1) + "extra: 1\n", "unknown fields"),
        (node_yaml("node-a", port, "node-b", port), "same address"),
    ]:
        bad.write_text(text)
        rc, out, err = finish(start(node(str(bad), "recv", "--src", "node-b")))
        assert rc == 1 and words in err and "Traceback" not in err, err
    rc, _, err = finish(start(node(str(tmp_path / "missing.yaml"), "recv", "--src", "node-b")))
    assert rc == 1 and "not found" in err


def interrupt_twice(proc, port):
    wait_listening(port, proc)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    return finish(proc)


@pytest.mark.parametrize("args", [
    ["recv", "--src", "node-a", "--count", "0"],
    ["recv", "--src", "node-a", "--count", "3"],
])
def test_ctrl_c_exits_0_even_twice(configs, args):
    _, b = configs
    rc, out, err = interrupt_twice(start(node(b, *args)), load_runtime_config(b).local.port)
    assert rc == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_a_ctrl_c_while_the_node_exits_does_not_kill_it():
    # Python puts SIGINT's default action back as it finalizes: a second Ctrl-C that came late
    # (here, under load, after the first had ended the run) killed the node with status -2.
    program = ("import signal, sys\n"
               "from wireless_comm import node\n"
               "rc = node.main(['--config', '/nonexistent.yaml', 'recv', '--src', 'node-a'])\n"
               "print(rc, signal.getsignal(signal.SIGINT) is signal.SIG_IGN)\n")
    proc = subprocess.run([PYTHON, "-c", program], capture_output=True, text=True, env=child_env(), timeout=60)
    assert proc.stdout.split() == ["1", "True"], proc.stderr


def test_ctrl_c_twice_during_a_send(configs):
    # node-b is not running: the send waits, dialling, when the two Ctrl-Cs come.
    a, _ = configs
    proc = start(node(a, "send", "--dst", "node-b", "--tensor-shape", "1024,1024"))
    rc, out, err = interrupt_twice(proc, load_runtime_config(a).local.port)
    assert rc == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


# -- wcomm node: the same lines, its own documented exit codes -----------------------------------

needs_cli = pytest.mark.skipif(wcomm_cli() is None, reason="the C++ wcomm CLI is not built (set WCOMM_CLI)")


def cpp_node(config, *args):
    return [wcomm_cli(), "node", "--config", config, *args]


@needs_cli
def test_cpp_node_prints_v01_lines(configs):
    a, b = configs
    server = start(cpp_node(b, "echo", "--src", "node-a", "--tag", "1", "--count", "1"))
    wait_listening(load_runtime_config(b).local.port, server)
    rc, out, err = finish(start(cpp_node(a, "send", "--dst", "node-b", "--tag", "1", "--json",
                                         '{"message":"hello","x":1.5,"big":1e16,"q":"it\'s"}',
                                         "--metadata", '{"trace_id":"wifi-test-1"}', "--expect-reply")))
    assert rc == 0, err
    src, sout, serr = finish(server)
    assert src == 0, serr
    # Python's repr of the same values, byte for byte.
    obj = {"message": "hello", "x": 1.5, "big": 1e16, "q": "it's"}
    line = f"object={obj!r} piggypayload={ {'trace_id': 'wifi-test-1'}!r}"
    assert out.splitlines() == [f"sent {line}", f"received {line}"]
    assert sout.splitlines() == [f"received {line}", f"echoed {line}"]


@needs_cli
@pytest.mark.parametrize("alias", ["half", "double", "long", "int", "float"])
def test_cpp_node_takes_torch_dtype_aliases(configs, alias):
    a, b = configs
    server = start(node(b, "recv", "--src", "node-a", "--count", "1"))
    wait_listening(load_runtime_config(b).local.port, server)
    rc, out, err = finish(start(cpp_node(a, "send", "--dst", "node-b", "--tensor-shape", "2,3",
                                         "--tensor-dtype", alias)))
    assert rc == 0, err
    src, sout, serr = finish(server)
    dtype = getattr(torch, alias)
    assert sout == f"received object=Tensor(shape=(2, 3), dtype={dtype}) piggypayload=None\n"


@needs_cli
def test_cpp_node_refuses_negative_count(configs):
    _, b = configs
    rc, _, err = finish(start(cpp_node(b, "recv", "--src", "node-a", "--count", "-1")))
    assert rc == 2 and "--count" in err, err


@needs_cli
def test_cpp_node_survives_two_ctrl_c(configs):
    _, b = configs
    proc = start(cpp_node(b, "recv", "--src", "node-a", "--count", "0"))
    rc, _, err = interrupt_twice(proc, load_runtime_config(b).local.port)
    assert rc == 0, err  # serving until Ctrl-C: a clean stop (not killed by the second signal)
    proc = start(cpp_node(b, "recv", "--src", "node-a", "--count", "2"))
    rc, _, err = interrupt_twice(proc, load_runtime_config(b).local.port)
    assert rc == 130 and "wcomm node: interrupted" in err, err  # documented; never -SIGINT
