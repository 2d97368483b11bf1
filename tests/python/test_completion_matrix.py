"""Every way asyncio code awaits an operation, over every same-host transport, with the loop idle
and busy: each completes, and a recv given up by a timeout or a cancel loses no message (the
next recv on that tag gets it). docs/python.md, "asyncio and threads".

The bounds below are liveness bounds, not speed: an operation that should end at 0.2 s must end
well within LIMIT_S (10 s), on a loaded 2-core machine under a sanitizer-free build; they catch
an operation that hangs or blocks the loop, and nothing finer."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from wireless_comm import Comm, CommConfig, CommOptions, OperationTimeoutError, Peer

from helpers import free_port, run

LIMIT_S = 10.0
TRANSPORTS = ["tcp", "unix", "shm", "auto"]
STYLES = ["plain", "wait_for", "timeout_cm", "gather", "task_group", "shield"]


async def _pair(transport: str):
    config = CommConfig(transport=transport)
    pa, pb = Peer("node-a", "127.0.0.1", free_port()), Peer("node-b", "127.0.0.1", free_port())
    a = await Comm.create(local=pa, peers=[pb], bind_host="127.0.0.1", config=config)
    b = await Comm.create(local=pb, peers=[pa], bind_host="127.0.0.1", config=config)
    return a, b


@contextlib.asynccontextmanager
async def _pair_on_a_loop(transport: str, busy: bool):
    """node-a and node-b; with busy, a task keeps the loop's ready queue non-empty (every
    iteration has another callback to run) until both are closed."""
    a, b = await _pair(transport)
    stop = asyncio.Event()

    async def spin() -> None:
        while not stop.is_set():
            await asyncio.sleep(0)

    spinner = asyncio.create_task(spin()) if busy else None
    try:
        yield a, b
    finally:
        stop.set()
        if spinner:
            await spinner
        await a.close()
        await b.close()


async def _await(style: str, make):
    """Runs the coroutine make() in the given style and returns its result."""
    if style == "plain":
        return await make()
    if style == "wait_for":
        return await asyncio.wait_for(make(), LIMIT_S)
    if style == "timeout_cm":
        async with asyncio.timeout(LIMIT_S):
            return await make()
    if style == "gather":
        return (await asyncio.gather(make()))[0]
    if style == "task_group":
        async with asyncio.TaskGroup() as group:
            task = group.create_task(make())
        return task.result()
    if style == "shield":
        return await asyncio.shield(make())
    raise AssertionError(style)


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_send_and_recv_complete_however_they_are_awaited(transport, busy):
    async def main():
        async with _pair_on_a_loop(transport, busy) as (a, b):
            for i, style in enumerate(STYLES):
                # recv first (it waits), then the send that completes it.
                started = time.monotonic()
                recv = asyncio.create_task(_await(style, lambda: b.recv(b.peer("node-a"), CommOptions(tag=i))))
                sent = await _await(style, lambda: a.send({"i": i}, a.peer("node-b"), options=CommOptions(tag=i)))
                assert sent.wire_bytes > 0
                assert await asyncio.wait_for(recv, LIMIT_S) == ({"i": i}, None), style
                assert time.monotonic() - started < LIMIT_S

    run(main())


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
@pytest.mark.parametrize("how", ["own_timeout", "wait_for", "timeout_cm", "cancel", "huge_own_timeout"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_recv_given_up_ends_on_time_and_loses_no_message(transport, how, busy):
    async def main():
        async with _pair_on_a_loop(transport, busy) as (a, b):
            src = b.peer("node-a")
            await a.send("connect", a.peer("node-b"), options=CommOptions(tag=1))
            assert await b.recv(src, CommOptions(tag=1)) == ("connect", None)
            started = time.monotonic()
            if how == "own_timeout":
                with pytest.raises(OperationTimeoutError):
                    await b.recv(src, CommOptions(tag=5, timeout=0.2))
                # V0.1's idiom: the op's own timeout is not the outer wait's (asyncio.TimeoutError).
                try:
                    await asyncio.wait_for(b.recv(src, CommOptions(tag=5, timeout=0.2)), 5)
                    raise AssertionError("the recv did not time out")
                except asyncio.TimeoutError:
                    raise AssertionError("the recv's own timeout was taken for the outer wait's")
                except OperationTimeoutError:
                    pass
            elif how == "wait_for":
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(b.recv(src, CommOptions(tag=5)), 0.2)
            elif how == "timeout_cm":
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await b.recv(src, CommOptions(tag=5))
            elif how == "huge_own_timeout":
                # A timeout too long for the clock means "no end": the outer wait ends it, and
                # the event loop is never blocked meanwhile (it used to be, inside the core).
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(b.recv(src, CommOptions(tag=5, timeout=1e10)), 0.2)
            else:
                task = asyncio.create_task(b.recv(src, CommOptions(tag=5)))
                await asyncio.sleep(0.2)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert time.monotonic() - started < LIMIT_S
            # The message that comes now goes to the next recv on that tag, whole and once.
            await a.send("after", a.peer("node-b"), options=CommOptions(tag=5))
            assert await asyncio.wait_for(b.recv(src, CommOptions(tag=5)), LIMIT_S) == ("after", None)
            await a.send("next", a.peer("node-b"), options=CommOptions(tag=5))
            assert await asyncio.wait_for(b.recv(src, CommOptions(tag=5)), LIMIT_S) == ("next", None)

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_recv_cancelled_as_its_message_arrives_passes_it_on(transport):
    # Many recvs cancelled at every moment relative to their messages' arrival: each message is
    # received exactly once, in order, by a later recv.
    async def main():
        a, b = await _pair(transport)
        src = b.peer("node-a")
        try:
            got = []
            for i in range(60):
                task = asyncio.create_task(b.recv(src, CommOptions(tag=7)))
                await a.send(i, a.peer("node-b"), options=CommOptions(tag=7))
                for _ in range(i % 4):
                    await asyncio.sleep(0)
                if task.cancel():
                    try:
                        got.append((await task)[0])  # it had completed before the cancel came
                    except asyncio.CancelledError:
                        pass
                else:
                    got.append(task.result()[0])
            while len(got) < 60:
                got.append((await asyncio.wait_for(b.recv(src, CommOptions(tag=7)), LIMIT_S))[0])
            assert got == list(range(60))
            with pytest.raises(OperationTimeoutError):
                await b.recv(src, CommOptions(tag=7, timeout=0.1))
        finally:
            await a.close()
            await b.close()

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_recv_whose_message_came_just_before_its_cancel_passes_it_on(transport):
    # The exact race the test above meets by chance: the recv's future is resolved (its
    # completion drained) and its task is cancelled before it resumes, so asyncio throws
    # CancelledError into it and the result would be dropped. It used to lose the message.
    # Nothing yields between the recv's parking and its cancel: the send is the core's own
    # call, and the completion is waited for and drained by hand.
    async def main():
        async with _pair_on_a_loop(transport, busy=False) as (a, b):
            src = b.peer("node-a")
            await a.send("connect", a.peer("node-b"), options=CommOptions(tag=1))
            assert await b.recv(src, CommOptions(tag=1)) == ("connect", None)
            task = asyncio.create_task(b.recv(src, CommOptions(tag=8)))
            await asyncio.sleep(0)  # the recv is posted and waits
            (op,) = [op for op, w in b._recv_ops.items() if w is not None]
            a._core.send("first", "node-b", None, 8, None, True, 0)
            while op in b._recv_ops:  # until the recv's completion is drained (not an event's)
                assert b._core.spin(int(LIMIT_S * 1e6)), "no completion came"
                b._on_ready()  # resolves the recv's future now; its task resumes later
            assert task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await a.send("second", a.peer("node-b"), options=CommOptions(tag=8))
            assert await asyncio.wait_for(b.recv(src, CommOptions(tag=8)), LIMIT_S) == ("first", None)
            assert await asyncio.wait_for(b.recv(src, CommOptions(tag=8)), LIMIT_S) == ("second", None)

    run(main())
