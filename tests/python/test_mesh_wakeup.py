"""The same call sites on every backend: an EventWakeup set from another thread ends
poll_for_messages early (False, event drained); poll / get_all_new_messages see messages;
try_send_bytes says False at the high-water mark."""
import concurrent.futures
import threading
import time

import pytest

from helpers import free_port_pair
from mesh_util import BACKENDS, protocol_for
from wireless_comm.mesh import (CommProtocol, EventWakeup, NativeZMQCommunicator, OutboxCommunicator,
                                WcommCommunicator, ZMQCommunicator)


# wcomm_rdma: the wcomm backend over CommProtocol.RDMA (wcomm's ucx transport).
WITH_RDMA = BACKENDS + ["wcomm_rdma"]


@pytest.fixture(autouse=True)
def rdma_ports(monkeypatch):
    monkeypatch.setenv("WCOMM_MESH_RDMA_BASE_PORT", str(free_port_pair() - 100))  # worker_0, worker_1


def make(backend, tmp_path, me, push, hwm=None):
    prefix = str(tmp_path / "ipc") + "/"
    protocol = CommProtocol.RDMA if backend == "wcomm_rdma" else CommProtocol(protocol_for(backend))
    if backend == "pyzmq":
        return ZMQCommunicator(me, push, protocol, prefix)
    kwargs = {"sndhwm": hwm, "rcvhwm": hwm} if hwm else {}
    cls = NativeZMQCommunicator if backend == "native" else WcommCommunicator
    return cls(me, push, protocol, prefix, **kwargs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_poll_with_its_event_closed_raises_ebadf(tmp_path, backend):
    # It returned False at once, every time: a polling loop spun at full CPU. mstar raises
    # OSError EBADF.
    import errno

    c = make(backend, tmp_path, "worker_0", [])
    event = EventWakeup()
    c.register_event_for_poll(event)
    event.close()
    with pytest.raises(OSError) as raised:
        c.poll_for_messages(10)
    assert raised.value.errno == errno.EBADF, raised.value
    c.close()


@pytest.mark.parametrize("backend", WITH_RDMA)
def test_event_wakeup_ends_poll_early(tmp_path, backend):
    c = make(backend, tmp_path, "worker_0", [])
    event = EventWakeup()
    c.register_event_for_poll(event)
    setter = threading.Timer(0.05, event.set)  # before or during the poll: it must end either way
    setter.start()
    started = time.monotonic()
    assert c.poll_for_messages(timeout_ms=20000) is False
    assert time.monotonic() - started < 10
    setter.join()
    # drained by the poll: nothing left to read
    import os
    with pytest.raises(BlockingIOError):
        os.eventfd_read(event.fd)
    # a future's completion wakes wait_for_work the same way
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        event.register_future(pool.submit(time.sleep, 0.05))
        started = time.monotonic()
        c.wait_for_work(timeout_ms=20000)
        assert time.monotonic() - started < 10
    c.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_mstars_names_register_futures_event_and_codecs(tmp_path, backend):
    # What mstar's worker calls: EventWakeup.register_futures (set when any completes), the
    # communicator's event attribute; the codec classes and BLOCKING_POLL_SLICE_MS import from
    # the communicator module.
    from wireless_comm.mesh import BLOCKING_POLL_SLICE_MS, Codec, MsgpackCodec, PickleCodec

    assert BLOCKING_POLL_SLICE_MS == 50 and issubclass(MsgpackCodec, Codec) and issubclass(PickleCodec, Codec)
    c = make(backend, tmp_path, "worker_0", [])
    assert c.event is None
    event = EventWakeup()
    c.register_event_for_poll(event)
    assert c.event is event and OutboxCommunicator(c).event is event
    never = concurrent.futures.Future()  # nothing completes it
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        event.register_futures([never, pool.submit(time.sleep, 0.05)])
        started = time.monotonic()
        assert c.poll_for_messages(timeout_ms=20000) is False
        assert time.monotonic() - started < 10  # the quick one ended it
    c.close()
    event.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_msgpack_mesh(tmp_path, backend):
    from wireless_comm.mesh import MsgpackCodec

    prefix = str(tmp_path / "ipc") + "/"
    protocol = CommProtocol(protocol_for(backend))
    cls = {"pyzmq": ZMQCommunicator, "native": NativeZMQCommunicator, "wcomm": WcommCommunicator}[backend]
    a = cls("worker_0", ["worker_1"], protocol, prefix, codec=MsgpackCodec)
    b = cls("worker_1", ["worker_0"], protocol, prefix, codec=MsgpackCodec)
    a.send("worker_1", {"text": "hi", "raw": b"\x00\xff", "n": [1, 2.5, None]})
    got = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        got = b.get_all_new_messages(blocking=True, timeout_s=1)
    assert got == [{"text": "hi", "raw": b"\x00\xff", "n": [1, 2.5, None]}]
    a.close()
    b.close()


@pytest.mark.parametrize("backend", WITH_RDMA)
def test_poll_then_get(tmp_path, backend):
    a = make(backend, tmp_path, "worker_0", ["worker_1"])
    b = make(backend, tmp_path, "worker_1", ["worker_0"])
    assert b.poll_for_messages(timeout_ms=0) is False
    a.send("worker_1", {"n": 1})
    a.send("worker_1", ("two", 2))
    assert b.poll_for_messages(timeout_ms=10000) is True
    got = []
    while len(got) < 2:
        got += b.get_all_new_messages(blocking=True, timeout_s=10)
    assert got == [{"n": 1}, ("two", 2)]
    assert b.get_all_new_messages() == []
    a.close()
    b.close()


@pytest.mark.parametrize("backend", ["native", "wcomm", "wcomm_rdma"])
def test_outbox_queues_at_the_high_water_mark_and_drains_in_order(tmp_path, backend):
    a = make(backend, tmp_path, "worker_0", ["worker_1"], hwm=1)
    taken = 0
    while taken < 100 and a.try_send_bytes("worker_1", a.codec.encode({"pre": taken})):
        taken += 1
    assert taken < 100  # nobody reads worker_1 yet
    outbox = OutboxCommunicator(a, warn_backlog=3)
    outbox.send_each(["worker_1"] * 5, {"same": True})
    for i in range(5):
        outbox.send("worker_1", {"i": i})
    assert outbox.backlog("worker_1") == 10 and outbox.flush() is True
    b = make(backend, tmp_path, "worker_1", ["worker_0"])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < taken + 10 and time.monotonic() < deadline:
        outbox.flush()
        got += b.get_all_new_messages(blocking=True, timeout_s=0.05)
    assert got == [{"pre": i} for i in range(taken)] + [{"same": True}] * 5 + [{"i": i} for i in range(5)]
    assert outbox.flush() is False
    a.close()
    b.close()
