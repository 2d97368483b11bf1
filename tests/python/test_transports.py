"""Transport selection from Python: CommConfig(transport=...), a peer's own transport, and
comm.stats()["peers"] naming how each peer is reached (shared memory between two nodes of
one host by default)."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest
import torch

from wireless_comm import (Comm, CommConfig, CommOptions, ConnectionClosedError, ConnectionFailedError, Peer,
                           TlsConfig)

from helpers import REPO, free_port, run


async def _pair(config_a=CommConfig(), config_b=CommConfig(), transport_b=""):
    pa = Peer("node-a", "127.0.0.1", free_port())
    pb = Peer("node-b", "127.0.0.1", free_port())
    a = await Comm.create(local=pa, peers=[Peer("node-b", pb.host, pb.port, transport=transport_b)], config=config_a)
    b = await Comm.create(local=pb, peers=[pa], config=config_b)
    return a, b


@pytest.mark.parametrize("transport, path", [("auto", "cma"), ("shm", "cma"), ("unix", "stream"), ("tcp", "stream")])
def test_each_transport_moves_a_tensor_and_stats_name_it(transport, path):
    async def main():
        config = CommConfig(transport=transport)
        a, b = await _pair(config, config)
        try:
            t = torch.arange(1 << 20, dtype=torch.float32)
            await a.send({"t": t}, a.peer("node-b"))
            got, _ = await b.recv(b.peer("node-a"), CommOptions(timeout=10))
            assert torch.equal(got["t"], t)
            peer = a.stats()["peers"]["node-b"]
            assert peer["connected"] is True
            assert peer["transport"] == ("shm" if transport == "auto" else transport)
            assert peer["payload_path"] == path
        finally:
            await a.close()
            await b.close()

    run(main())


def test_ucx_addresses_carry_a_64_mib_tensor_and_a_closed_peer_is_a_typed_error():
    async def main():
        pa = Peer("node-a", addresses=[f"ucx://127.0.0.1:{free_port()}"], transport="ucx")
        pb = Peer("node-b", addresses=[f"ucx://127.0.0.1:{free_port()}"], transport="ucx")
        config = CommConfig(max_message_bytes=256 << 20)
        a = await Comm.create(local=pa, peers=[pb], config=config)
        b = await Comm.create(local=pb, peers=[pa], config=config)
        try:
            t = torch.arange(16 << 20, dtype=torch.int32)  # 64 MiB
            await a.send({"t": t}, a.peer("node-b"))
            got, _ = await b.recv(b.peer("node-a"), CommOptions(timeout=20))
            assert torch.equal(got["t"], t)
            assert a.stats()["peers"]["node-b"]["transport"] == "ucx"
            waiting = asyncio.ensure_future(b.recv(b.peer("node-a")))  # only node-a's end can end it
            await asyncio.sleep(0.2)  # posted before the close
            await a.close()
            with pytest.raises(ConnectionClosedError):
                await asyncio.wait_for(waiting, 20)
        finally:
            await a.close()
            await b.close()

    run(main())


def test_a_peer_listed_with_its_own_transport_overrides_the_config():
    async def main():
        a, b = await _pair(transport_b="tcp")
        try:
            await a.send("hi", a.peer("node-b"))
            got, _ = await b.recv(b.peer("node-a"), CommOptions(timeout=10))
            assert got == "hi"
            assert a.stats()["peers"]["node-b"]["transport"] == "tcp"
            assert b.stats()["peers"]["node-a"]["transport"] == "tcp"
        finally:
            await a.close()
            await b.close()

    run(main())


def test_a_bad_transport_is_refused_naming_it():
    with pytest.raises(ValueError, match="CommConfig.transport must be one of auto, shm, unix, tcp"):
        CommConfig(transport="carrier-pigeon")
    with pytest.raises(ValueError, match="Peer.transport"):
        Peer("node-b", "127.0.0.1", 9000, transport="udp")


def test_a_cluster_key_lets_keyed_nodes_talk_and_refuses_an_unkeyed_one():
    async def main():
        key = b"a-cluster-key-of-some-length"
        a, b = await _pair(CommConfig(cluster_key=key), CommConfig(cluster_key=key))
        try:
            await a.send("keyed", a.peer("node-b"))
            got, _ = await b.recv(b.peer("node-a"), CommOptions(timeout=10))
            assert got == "keyed"
        finally:
            await a.close()
            await b.close()
        a, b = await _pair(CommConfig(), CommConfig(cluster_key=key))
        try:
            with pytest.raises(ConnectionFailedError, match="requires a cluster key"):
                await a.send("unkeyed", a.peer("node-b"), options=CommOptions(timeout=10))
        finally:
            await a.close()
            await b.close()

    run(main())


def test_a_short_key_or_a_str_is_refused_and_the_key_is_not_printed():
    with pytest.raises(ValueError, match="cluster_key"):
        CommConfig(cluster_key=b"short")
    with pytest.raises(ValueError, match="must be bytes"):
        CommConfig(cluster_key="a-cluster-key-as-text")
    assert "secret-key-0123456789" not in repr(CommConfig(cluster_key=b"secret-key-0123456789"))


def _make_certs(tmp_path, *nodes):
    script = os.path.join(REPO, "scripts", "make-test-certs.sh")
    subprocess.run(["bash", script, str(tmp_path), *nodes], check=True)
    return lambda node: TlsConfig(str(tmp_path / f"{node}.pem"), str(tmp_path / f"{node}.key"), str(tmp_path / "ca.pem"))


def test_tls_nodes_talk_over_tls_and_a_plain_node_is_refused(tmp_path):
    tls = _make_certs(tmp_path, "node-a", "node-b")

    async def main():
        a, b = await _pair(CommConfig(tls=tls("node-a")), CommConfig(tls=tls("node-b")))
        try:
            t = torch.arange(1 << 20, dtype=torch.float32)
            await a.send({"t": t}, a.peer("node-b"))
            got, _ = await b.recv(b.peer("node-a"), CommOptions(timeout=10))
            assert torch.equal(got["t"], t)
            assert a.stats()["peers"]["node-b"]["transport"] == "tls"  # auto: not shm
        finally:
            await a.close()
            await b.close()
        a, b = await _pair(CommConfig(connect_timeout_s=2), CommConfig(tls=tls("node-b")))
        try:
            with pytest.raises(ConnectionFailedError, match="speaks TLS"):
                await a.send("plain", a.peer("node-b"), options=CommOptions(timeout=10))
        finally:
            await a.close()
            await b.close()

    run(main())


def test_tls_config_is_checked_and_round_trips(tmp_path):
    tls = _make_certs(tmp_path, "node-a")
    config = CommConfig(tls=tls("node-a"))
    assert CommConfig._from_fields(config._fields()) == config
    assert CommConfig._from_fields(CommConfig()._fields()).tls is None
    with pytest.raises(ValueError, match="TlsConfig.key_file"):
        TlsConfig(str(tmp_path / "node-a.pem"), "", str(tmp_path / "ca.pem"))
    with pytest.raises(ValueError, match="CommConfig.tls must be a TlsConfig"):
        CommConfig(tls={"cert_file": "x"})
    with pytest.raises(ValueError, match="bypass TLS"):
        CommConfig(tls=tls("node-a"), transport="shm")
