"""Per-peer send queue bounds through the Python API: fail-fast and wait-for-capacity, the
single-message bound, timeouts and cancellation of queued and active sends."""

import asyncio
import gc
import weakref

import pytest
import torch

from wireless_comm import (
    BackpressureError,
    Comm,
    CommConfig,
    CommOptions,
    MessageTooLargeError,
    OperationTimeoutError,
    Peer,
)
from helpers import free_port, make_pair, run


def test_fail_fast_and_wait_for_capacity():
    async def body():
        # node-b does not exist yet: sends queue up while node-a retries its dial.
        pa, pb = Peer("node-a", "127.0.0.1", free_port()), Peer("node-b", "127.0.0.1", free_port())
        a = await Comm.create(local=pa, peers=[pb], config=CommConfig(max_peer_queued_messages=2,
                                                                       connect_timeout_s=10))
        dst = a.peer("node-b")
        f1 = asyncio.create_task(a.send(1, dst))
        f2 = asyncio.create_task(a.send(2, dst))
        await asyncio.sleep(0)
        with pytest.raises(BackpressureError, match="max_peer_queued_messages=2"):
            await a.send(3, dst, options=CommOptions(wait_for_capacity=False))
        f4 = asyncio.create_task(a.send(4, dst))  # waits for capacity
        done, _ = await asyncio.wait([f4], timeout=0.05)
        assert not done
        b = await Comm.create(local=pb, peers=[pa])  # start order does not matter
        await asyncio.gather(f1, f2, f4)
        assert [(await b.recv(b.peer("node-a")))[0] for _ in range(3)] == [1, 2, 4]
        await a.close()
        await b.close()
    run(body())


def test_message_larger_than_the_queue_bound_is_rejected():
    async def body():
        a, b = await make_pair(CommConfig(max_peer_queued_bytes=1 << 20))
        with pytest.raises(MessageTooLargeError, match="max_peer_queued_bytes"):
            await a.send(torch.zeros(2 << 20, dtype=torch.uint8), a.peer("node-b"))
        await a.close()
        await b.close()
    run(body())


def test_timeout_cancels_an_active_send_and_releases_capacity():
    async def body():
        a, b = await make_pair(CommConfig(max_peer_queued_messages=2),
                               CommConfig(max_peer_unreceived_messages=1))  # b stops reading after one
        dst = a.peer("node-b")
        await a.send("fills the receiver's inbox", dst)
        big = torch.zeros(64 << 20, dtype=torch.uint8)  # far more than the socket buffers hold
        with pytest.raises(OperationTimeoutError):
            await a.send(big, dst, options=CommOptions(timeout=0.3))
        # Capacity is back: two fail-fast sends are admitted (on a fresh connection).
        fast = CommOptions(wait_for_capacity=False)
        await asyncio.gather(a.send("after-1", dst, options=fast), a.send("after-2", dst, options=fast))
        await a.close()
        await b.close()
    run(body())


def test_cancelling_a_queued_send_removes_it():
    async def body():
        pa, pb = Peer("node-a", "127.0.0.1", free_port()), Peer("node-b", "127.0.0.1", free_port())
        a = await Comm.create(local=pa, peers=[pb], config=CommConfig(max_peer_queued_messages=1))
        queued = asyncio.create_task(a.send("never", a.peer("node-b")))  # nobody listens yet
        await asyncio.sleep(0)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        # The slot is free again, and the cancelled message never goes out.
        nxt = asyncio.create_task(a.send("next", a.peer("node-b"), options=CommOptions(wait_for_capacity=False)))
        b = await Comm.create(local=pb, peers=[pa])
        await nxt
        assert (await b.recv(b.peer("node-a")))[0] == "next"
        with pytest.raises(OperationTimeoutError):
            await b.recv(b.peer("node-a"), CommOptions(timeout=0.2))
        await a.close()
        await b.close()
    run(body())


def test_cancelling_an_active_send_keeps_the_tensor_until_the_writer_stops():
    async def body():
        a, b = await make_pair(CommConfig(), CommConfig(max_peer_unreceived_messages=1))
        dst = a.peer("node-b")
        await a.send("fills the receiver's inbox", dst)
        big = torch.ones(64 << 20, dtype=torch.uint8)
        alive = weakref.ref(big)
        task = asyncio.create_task(a.send(big, dst))
        del big
        await asyncio.sleep(0.2)  # the writer is stuck mid-frame (the receiver does not read)
        gc.collect()
        assert alive() is not None  # borrowed by the send in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):  # released once the core reports the send finished
            if alive() is None:
                break
            await asyncio.sleep(0.01)
            gc.collect()
        assert alive() is None
        await a.send("after", dst)
        await a.close()
        await b.close()
    run(body())
