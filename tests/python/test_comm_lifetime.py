"""A Comm's life on the asyncio loop: one dropped without close() is collected and closed while
the loop runs (its port is free again), and a recv waits for its message on the asyncio thread
only while that pays (docs/python.md, "Event loop")."""

from __future__ import annotations

import asyncio
import gc
import time
import warnings
import weakref

import pytest

from helpers import CLOSE, DATA, HELLO_ACK, RawClient, free_port, hello, make_pair, run
from wireless_comm import Comm, CommOptions, OperationTimeoutError, Peer
from wireless_comm import comm as comm_module


def test_a_comm_dropped_without_close_is_collected_warns_once_and_frees_its_port():
    async def body():
        port = free_port()
        comm = await Comm.create(Peer("node-a", "127.0.0.1", port), [], bind_host="127.0.0.1")
        ref = weakref.ref(comm)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            del comm
            gc.collect()
        assert ref() is None, "the loop's reader kept the Comm alive"
        assert [str(w.message) for w in seen if w.category is ResourceWarning] == [
            "Comm 'node-a' was not closed; call `await comm.close()`"]
        # Its listener is gone: a new Comm binds the same port (it used to fail with "Address
        # already in use" while the loop ran).
        again = await Comm.create(Peer("node-a", "127.0.0.1", port), [], bind_host="127.0.0.1")
        await again.close()
    run(body())


def test_a_recv_that_waited_in_vain_stops_waiting_on_the_loop_thread_for_a_while():
    async def body():
        a, b = await make_pair()
        src = b.peer("node-a")
        assert b._spin_budget() == comm_module._RECV_SPIN_US
        # Nothing comes: the recv's wait on the asyncio thread did not pay.
        with pytest.raises(OperationTimeoutError):
            await b.recv(src, CommOptions(tag=9, timeout=0.05))
        budgets = [b._spin_budget() for _ in range(comm_module._RECV_SPIN_BACKOFF)]
        assert budgets == [0] * comm_module._RECV_SPIN_BACKOFF
        assert b._spin_budget() == comm_module._RECV_SPIN_US  # then it tries again
        # A message that is there completes the recv at once, whatever the budget.
        await a.send("x", a.peer("node-b"), options=CommOptions(tag=3))
        assert await b.recv(src, CommOptions(tag=3)) == ("x", None)
        await a.close()
        await b.close()
    run(body())


def test_close_waits_for_a_peer_that_does_not_read_and_the_event_loop_runs_meanwhile():
    async def body():
        a, b = await make_pair()
        raw = RawClient(b.port)  # pretends to be node-a; reads nothing until the end, never closes
        raw.write(hello("node-a"))
        assert raw.read_frame()[0][2] == HELLO_ACK
        await b.send("last", b.peer("node-a"))
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1
        ticker = asyncio.create_task(tick())
        start = time.monotonic()
        await b.close()
        took = time.monotonic() - start
        ticker.cancel()
        # b lingers 2 s for the peer's end of stream (docs/python.md), which never comes; the
        # upper bound is a hang guard.
        assert 1.9 <= took < 10, took
        assert ticks >= 100, f"close() held the event loop: {ticks} ticks in {took:.2f} s"
        # What b sent, then its CLOSE, then the end of stream.
        assert raw.read_frame()[0][2] == DATA
        assert raw.read_frame()[0][2] == CLOSE
        assert raw.closed_by_peer()
        raw.close()
        await a.close()
    run(body())
