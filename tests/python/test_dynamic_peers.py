"""Peers that join and leave at run time from Python (Comm.add_peer / remove_peer): two
nodes that knew nobody exchange, a leaving peer's pending recv fails with the reason, and the
peer can be added again; a node that accepts unknown peers adds one that proves the cluster
key and reports it, and refuses to be created for joins that nothing authenticates."""

from __future__ import annotations

import asyncio

import pytest

from wireless_comm import Comm, CommConfig, CommOptions, ConnectionClosedError, ConnectionFailedError, Peer

from helpers import run


async def lone(name: str, **config) -> Comm:
    config.setdefault("transport", "tcp")
    return await Comm.create(local=Peer(name, "127.0.0.1", 0), peers=[], config=CommConfig(**config))


def as_peer(comm: Comm) -> Peer:
    return Peer(comm.local.node_id, "127.0.0.1", comm.port)


def test_nodes_that_knew_nobody_join_leave_and_rejoin():
    async def main():
        a, b = await lone("node-a"), await lone("node-b")
        assert a.peers() == ()
        a.add_peer(as_peer(b))
        b.add_peer(as_peer(a))
        await a.send("hello", a.peer("node-b"))
        obj, _ = await asyncio.wait_for(b.recv(b.peer("node-a")), 10)
        assert obj == "hello"
        assert [p.node_id for p in a.peers()] == ["node-b"]

        pending = asyncio.ensure_future(a.recv(a.peer("node-b"), CommOptions(tag=5)))
        await asyncio.sleep(0)  # (its first step posts the recv)
        assert a.remove_peer("node-b", "scaled down")
        with pytest.raises(ConnectionClosedError, match="peer 'node-b' was removed: scaled down"):
            await asyncio.wait_for(pending, 10)
        with pytest.raises(KeyError):
            a.peer("node-b")
        assert not a.remove_peer("node-b")

        a.add_peer(as_peer(b))  # back: a new session
        await a.send("again", a.peer("node-b"))
        obj, _ = await asyncio.wait_for(b.recv(b.peer("node-a")), 10)
        assert obj == "again"
        await a.close()
        await b.close()

    run(main())


def test_add_peer_refuses_bad_input():
    async def main():
        a = await lone("node-a")
        with pytest.raises(ValueError, match="own node_id"):
            a.add_peer(Peer("node-a", "127.0.0.1", 9))
        a.add_peer(Peer("node-b", "127.0.0.1", 9))
        with pytest.raises(ValueError, match="there already"):
            a.add_peer(Peer("node-b", "127.0.0.1", 10))
        await a.close()
        with pytest.raises(ConnectionClosedError):
            a.add_peer(Peer("node-c", "127.0.0.1", 9))

    run(main())


KEY = b"the python join tests' cluster key"


def test_an_unknown_node_with_the_key_joins_and_is_reported():
    async def main():
        host = await lone("host", cluster_key=KEY, accept_unknown_peers=True)
        b = await lone("node-b", cluster_key=KEY)
        b.add_peer(as_peer(host))
        await b.send("hello", b.peer("host"), options=CommOptions(ack=True))
        events = host.peer_events()
        event = await asyncio.wait_for(events.__anext__(), 10)
        assert (event.node_id, event.kind) == ("node-b", "joined")
        assert host.peer("node-b").port == b.port  # where node-b listens
        obj, _ = await asyncio.wait_for(host.recv(host.peer("node-b")), 10)
        assert obj == "hello"
        await host.send("welcome", host.peer("node-b"))
        obj, _ = await asyncio.wait_for(b.recv(b.peer("host")), 10)
        assert obj == "welcome"

        stranger = await lone("node-c")  # no key: refused, not added
        stranger.add_peer(as_peer(host))
        with pytest.raises(ConnectionFailedError, match="cluster key"):
            await stranger.send("knock", stranger.peer("host"), options=CommOptions(ack=True, timeout=3))
        assert [p.node_id for p in host.peers()] == ["node-b"]
        for comm in (host, b, stranger):
            await comm.close()

    run(main())


def test_joins_that_nothing_authenticates_are_refused_at_create():
    async def main():
        with pytest.raises(ValueError, match="needs comm.cluster_key"):
            await lone("host", accept_unknown_peers=True)
        host = await lone("host", accept_unknown_peers=True, allow_unauthenticated_joins=True)  # loopback
        await host.close()

    run(main())
