"""`python -m wireless_comm.node` against the C++ `wcomm node` (and itself): two real
processes each way, the Python API talking to a C++ node, and the CLI's failure paths."""

import asyncio
import os
import signal
import subprocess
import time

import pytest
import torch

from wireless_comm import Comm, CommOptions, Peer, load_runtime_config
from helpers import PYTHON, child_env, finish, free_port, node_yaml, run, start, wcomm_cli, write_node_pair

DEADLINE_S = 30

needs_cli = pytest.mark.skipif(wcomm_cli() is None, reason="the C++ wcomm CLI is not built (set WCOMM_CLI)")


@pytest.fixture
def configs(tmp_path):
    return write_node_pair(str(tmp_path))


def py_node(config, *args):
    return [PYTHON, "-m", "wireless_comm.node", "--config", config, *args]


def cpp_node(config, *args):
    return [wcomm_cli(), "node", "--config", config, *args]




def echo_round_trip(server_argv, client_argv):
    server = start(server_argv)
    client = start(client_argv)
    rc, out, err = finish(client)
    src, serr_out, serr = finish(server)
    assert rc == 0, err
    assert src == 0, serr
    return out, serr_out


SEND_JSON = ["send", "--dst", "node-b", "--tag", "1", "--timeout", "20", "--json", '{"message":"hello","n":[1,2]}',
             "--metadata", '{"trace_id":"wifi-test-1"}', "--expect-reply"]
ECHO = ["echo", "--src", "node-a", "--tag", "1", "--count", "1", "--timeout", "20"]


V01_OBJECT = "object={'message': 'hello', 'n': [1, 2]} piggypayload={'trace_id': 'wifi-test-1'}"


def check_echo(client_out, server_out):
    # V0.1's lines (the default format).
    assert client_out == f"sent {V01_OBJECT}\nreceived {V01_OBJECT}\n"
    assert server_out == f"received {V01_OBJECT}\nechoed {V01_OBJECT}\n"


def check_echo_wcomm(client_out, server_out):
    assert "sent message_id=1" in client_out
    assert "value={'message': 'hello', 'n': [1, 2]}" in client_out
    assert "piggypayload={'trace_id': 'wifi-test-1'}" in client_out
    assert "received from node-a tag=1" in server_out and "echoed to node-a tag=1" in server_out


@needs_cli
def test_python_node_echoes_for_cpp_node(configs):
    a, b = configs
    check_echo(*echo_round_trip(py_node(b, *ECHO), cpp_node(a, *SEND_JSON)))


@needs_cli
def test_cpp_node_echoes_for_python_node(configs):
    a, b = configs
    check_echo(*echo_round_trip(cpp_node(b, *ECHO), py_node(a, *SEND_JSON)))


@needs_cli
def test_wcomm_format_on_both_sides(configs):
    a, b = configs
    # --format before the sub-command, or after it.
    check_echo_wcomm(*echo_round_trip(cpp_node(b, "--format", "wcomm", *ECHO), py_node(a, *SEND_JSON, "--format", "wcomm")))
    check_echo_wcomm(*echo_round_trip(py_node(b, "--format", "wcomm", *ECHO), cpp_node(a, *SEND_JSON, "--format", "wcomm")))


@needs_cli
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "bool", "int8"])
def test_pattern_tensors_match_between_python_and_cpp(configs, dtype):
    a, b = configs
    tensor = ["send", "--dst", "node-b", "--timeout", "20", "--tensor-shape", "3,224,224",
              "--tensor-dtype", dtype, "--expect-reply"]
    echo = ["echo", "--src", "node-a", "--count", "1", "--timeout", "20"]
    cpp_out, _ = echo_round_trip(cpp_node(b, *echo), cpp_node(a, *tensor))
    py_out, _ = echo_round_trip(py_node(b, *echo), py_node(a, *tensor))
    # Same values, same frame: the lines agree byte for byte.
    assert cpp_out == py_out
    assert f"received object=Tensor(shape=(3, 224, 224), dtype=torch.{dtype}) piggypayload=None" in py_out


@needs_cli
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                                   "float64", "bool"])
def test_cpp_arange_tensor_equals_pythons(configs, dtype):
    from wireless_comm.node import arange_tensor
    a, b = configs
    sender = start(cpp_node(a, "send", "--dst", "node-b", "--timeout", "20", "--tensor-shape", "2,300",
                            "--tensor-dtype", dtype))

    async def body():
        rc = load_runtime_config(b)
        comm = await Comm.create(local=rc.local, peers=rc.peers, bind_host=rc.bind_host)
        got, _ = await comm.recv(comm.peer("node-a"), CommOptions(timeout=20))
        await comm.close()
        return got

    got = run(body())
    assert finish(sender)[0] == 0
    expected = arange_tensor(dtype, [2, 300])
    assert got.dtype == expected.dtype and torch.equal(got, expected)


@needs_cli
def test_python_api_talks_to_a_cpp_node(configs):
    a, b = configs
    server = start(cpp_node(b, "echo", "--src", "node-a", "--count", "2", "--timeout", "20"))

    async def body():
        rc = load_runtime_config(a)
        comm = await Comm.create(local=rc.local, peers=rc.peers, bind_host=rc.bind_host, config=rc.comm)
        peer = comm.peer("node-b")
        t = torch.arange(3 * 224 * 224, dtype=torch.float32).reshape(3, 224, 224)
        await comm.send({"tensor": t, "label": ("x", 1)}, peer, piggypayload={"trace_id": "t-1"})
        got, piggy = await comm.recv(peer, CommOptions(timeout=20))
        assert torch.equal(got["tensor"], t) and got["label"] == ("x", 1) and piggy == {"trace_id": "t-1"}
        await comm.send(b"\x00" * 100_000, peer)
        got, _ = await comm.recv(peer, CommOptions(timeout=20))
        assert got == b"\x00" * 100_000
        await comm.close()

    run(body())
    rc, out, err = finish(server)
    assert rc == 0, err
    assert "received object={'tensor': Tensor(shape=(3, 224, 224), dtype=torch.float32), 'label': ('x', 1)} " \
           "piggypayload={'trace_id': 't-1'}" in out
    assert "received object=bytes(length=100000) piggypayload=None" in out


def test_python_nodes_echo_each_other(configs):
    a, b = configs
    check_echo(*echo_round_trip(py_node(b, *ECHO), py_node(a, *SEND_JSON)))


@pytest.mark.parametrize("args, message", [
    (["send", "--dst", "node-x", "--text", "hi"], "unknown peer 'node-x'; node-a's config knows: node-b"),
    (["send", "--dst", "node-a", "--text", "hi"], "'node-a' is this node itself"),
    (["send", "--dst", "node-b"], "give exactly one payload"),
    (["send", "--dst", "node-b", "--text", "a", "--json", "1"], "give exactly one payload"),
    (["send", "--dst", "node-b", "--json", "{nope"], "--json: not valid JSON"),
    (["send", "--dst", "node-b", "--text", "a", "--metadata", "[1]"], "--metadata: must be a JSON object"),
    (["send", "--dst", "node-b", "--tensor-shape", "3,x"], "is not a shape"),
    (["send", "--dst", "node-b", "--tensor-shape", "3", "--tensor-dtype", "f32"], "unknown dtype 'f32'"),
    (["send", "--dst", "node-b", "--text", "a", "--tensor-dtype", "int8"], "only meaningful with --tensor-shape"),
    (["send", "--dst", "node-b", "--file", "/nonexistent/file"], "--file: cannot open"),
    (["recv", "--src", "node-q"], "unknown peer 'node-q'"),
])
def test_option_value_errors_exit_1_with_a_message(configs, args, message):
    # V0.1 exits 1 for everything but a malformed command line.
    a, _ = configs
    rc, out, err = finish(start(py_node(a, *args)))
    assert rc == 1 and message in err, err


def test_bad_config_exits_1(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("local: {node_id: a, host: h, port: 1}\npeers: []\ncomm: {max_segmnts: 3}\n")
    rc, _, err = finish(start(py_node(str(bad), "recv", "--src", "b")))
    assert rc == 1 and "--config:" in err and "max_segmnts" in err
    # A missing --config is a malformed command line: argparse's 2.
    rc, _, err = finish(start([PYTHON, "-m", "wireless_comm.node", "recv", "--src", "b"]))
    assert rc == 2 and "--config" in err


def test_unreachable_peer_and_timeout_exit_1(configs):
    a, _ = configs
    rc, _, err = finish(start(py_node(a, "send", "--dst", "node-b", "--text", "hi", "--timeout", "0.3")))
    assert rc == 1 and "send to node-b (127.0.0.1:" in err and "timed out after 0.3 s" in err, err
    rc, _, err = finish(start(py_node(a, "recv", "--src", "node-b", "--timeout", "0.2")))
    assert rc == 1 and "recv from node-b" in err, err


@pytest.mark.parametrize("count, expected", [("1", 0), ("0", 0)])  # V0.1: Ctrl-C is a clean stop
def test_signal_ends_a_waiting_node(configs, count, expected):
    _, b = configs
    proc = start(py_node(b, "recv", "--src", "node-a", "--count", count))
    # Wait until the node listens (its port accepts), then interrupt it.
    port = load_runtime_config(b).local.port
    deadline = time.monotonic() + DEADLINE_S
    import socket
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "the node did not start"
            time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    rc, _, err = finish(proc)
    assert rc == expected, err
