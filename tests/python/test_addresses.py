"""Addresses beyond V0.1's host + port: unix sockets (a path or an abstract name) and lists of
addresses, through the Python API and YAML node configs."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

from wireless_comm import Comm, CommOptions, Peer, load_runtime_config

from helpers import free_port, run


def test_peers_over_a_unix_socket_exchange_tensors():
    async def main():
        with tempfile.TemporaryDirectory() as d:
            pa = Peer("node-a", addresses=(f"unix://{d}/a.sock",))
            pb = Peer("node-b", addresses=(f"unix://{d}/b.sock",))
            a = await Comm.create(local=pa, peers=[pb])
            b = await Comm.create(local=pb, peers=[pa])
            try:
                t = torch.arange(1000, dtype=torch.float32)
                await a.send({"t": t}, a.peer("node-b"), piggypayload={"k": 1}, options=CommOptions(tag=3))
                got, piggy = await b.recv(b.peer("node-a"), CommOptions(tag=3))
                assert torch.equal(got["t"], t)
                assert piggy == {"k": 1}
                assert os.path.exists(f"{d}/b.sock")
                assert a.local.addresses == (f"unix://{d}/a.sock",)
            finally:
                await a.close()
                await b.close()
            assert not os.path.exists(f"{d}/b.sock"), "the socket file goes with its Comm"

    run(main())


def test_abstract_socket_and_a_peer_listed_at_two_addresses():
    async def main():
        name = f"wcomm-pytest-{os.getpid()}"
        dead = free_port()  # nothing listens there: the next address is tried at once
        pa = Peer("node-a", "127.0.0.1", free_port())
        pb_local = Peer("node-b", addresses=(f"unix://@{name}",))
        pb_seen = Peer("node-b", addresses=(f"tcp://127.0.0.1:{dead}", f"unix://@{name}"))
        a = await Comm.create(local=pa, peers=[pb_seen], bind_host="127.0.0.1")
        b = await Comm.create(local=pb_local, peers=[pa])
        try:
            await a.send("hello", a.peer("node-b"))
            got, _ = await b.recv(b.peer("node-a"), CommOptions(timeout=10))
            assert got == "hello"
        finally:
            await a.close()
            await b.close()

    run(main())


@pytest.mark.parametrize("bad", ["192.0.2.1:9000", "unix://relative", "tcp://h", "udp://h:1"])
def test_a_bad_address_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match="bad address"):
        Peer("node-b", addresses=(bad,))


def test_a_peer_needs_a_host_or_addresses():
    with pytest.raises(ValueError, match="addresses"):
        Peer("node-b")
    assert Peer("node-b", "192.0.2.11", 9000).addresses == ()  # V0.1's form unchanged


def test_yaml_addresses_reach_the_python_config(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text("local: {node_id: a, address: 'unix:///tmp/wcomm-a.sock'}\n"
                    "peers:\n  - {node_id: b, addresses: ['tcp://192.0.2.11:9000', 'unix://@b']}\n")
    config = load_runtime_config(path)
    assert config.local.addresses == ("unix:///tmp/wcomm-a.sock",)
    assert config.peers[0].addresses == ("tcp://192.0.2.11:9000", "unix://@b")
