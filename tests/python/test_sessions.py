"""Peer sessions from Python: peer events (up, down), PeerRestartedError's place in the
exception tree, and the session settings in CommConfig."""

from __future__ import annotations

import asyncio

import pytest

import wireless_comm
from wireless_comm import CommConfig, CommOptions, ConnectionClosedError, PeerEvent, PeerRestartedError

from helpers import make_pair, run


def test_peer_events_report_up_and_down_with_the_reason():
    async def main():
        a, b = await make_pair()
        events = a.peer_events()
        await a.send("hi", a.peer("node-b"))
        up = await asyncio.wait_for(events.__anext__(), 10)
        assert up == PeerEvent("node-b", "up", "")
        await b.close()
        down = await asyncio.wait_for(events.__anext__(), 10)
        assert (down.node_id, down.kind) == ("node-b", "down")
        assert "closed" in down.reason
        await a.close()
        with pytest.raises(StopAsyncIteration):  # ends once the Comm is closed and drained
            await asyncio.wait_for(events.__anext__(), 10)

    run(main())


def test_peer_restarted_error_is_a_connection_closed_error():
    assert issubclass(PeerRestartedError, ConnectionClosedError)
    assert issubclass(PeerRestartedError, ConnectionError)
    assert wireless_comm.PeerRestartedError is PeerRestartedError


def test_session_settings_are_checked():
    assert CommConfig().heartbeat_interval_s == 2.0
    CommConfig(heartbeat_interval_s=0)  # off
    with pytest.raises(ValueError, match="heartbeat_interval_s"):
        CommConfig(heartbeat_interval_s=0.001)
    with pytest.raises(ValueError, match="reconnect_backoff_initial_s"):
        CommConfig(reconnect_backoff_initial_s=5, reconnect_backoff_max_s=1)
    with pytest.raises(ValueError, match="handshake_timeout_s"):
        CommConfig(handshake_timeout_s=0)


def test_an_acked_send_completes_once_the_peer_has_read_it():
    async def main():
        a, b = await make_pair()
        result = await a.send("acked", a.peer("node-b"), options=CommOptions(ack=True))
        assert result.wire_bytes > 0
        got, _ = await b.recv(b.peer("node-a"))
        assert got == "acked"
        assert a.stats()["messages_sent"] == 1
        await a.close()
        await b.close()

    run(main())


def test_ack_must_be_a_bool():
    with pytest.raises(ValueError, match="ack"):
        CommOptions(ack=1)


def test_a_retried_send_with_the_same_retry_key_is_delivered_once():
    async def main():
        a, b = await make_pair()
        keyed = CommOptions(tag=2, ack=True, retry_key=2**64 - 1)
        await a.send("once", a.peer("node-b"), options=keyed)
        await a.send("once, retried", a.peer("node-b"), options=keyed)  # acknowledged, not delivered
        await a.send("next", a.peer("node-b"), options=CommOptions(tag=2, retry_key=0))
        assert await b.recv(b.peer("node-a"), CommOptions(tag=2)) == ("once", None)
        assert await b.recv(b.peer("node-a"), CommOptions(tag=2)) == ("next", None)
        assert b.stats()["duplicates_dropped"] == 1
        await a.close()
        await b.close()

    run(main())


@pytest.mark.parametrize("key", [-1, 2**64, 1.5, "7"])
def test_retry_key_must_be_an_unsigned_64_bit_int(key):
    with pytest.raises(ValueError, match="retry_key"):
        CommOptions(retry_key=key)
