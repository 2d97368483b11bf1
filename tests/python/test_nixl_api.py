"""wireless_comm.nixl in one process: descriptor lists, memory, backends, transfers between two
agents (cma) and loopback, telemetry, notifications, handles, and NIXL's answers to bad input."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from wireless_comm.nixl import _bindings as nb
from wireless_comm.nixl import _utils
from wireless_comm.nixl._api import nixl_agent, nixl_agent_config

_n = iter(range(1_000_000))


def agent(backends=("cma",), **kw) -> nixl_agent:
    return nixl_agent(f"t{next(_n)}", nixl_agent_config(backends=list(backends), **kw))


def addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture
def pair():
    a, b = agent(capture_telemetry=True, timeout=10), agent(timeout=10)
    src = (np.arange(1 << 20) % 251).astype(np.uint8)
    dst = np.zeros(1 << 20, np.uint8)
    a.register_memory(src)
    b.register_memory(dst)
    assert a.add_remote_agent(b.get_agent_metadata()) == b.name.encode()
    yield a, b, src, dst
    a.close()
    b.close()


def blocks(a: np.ndarray, n: int, size: int = 4096):
    return [(addr(a) + i * size, size, 0) for i in range(n)]


# -- _bindings ----------------------------------------------------------------------------------

def test_constants_enums_and_errors():
    assert nb.NIXL_INIT_AGENT == "" and nb.DEFAULT_COMM_PORT == 8888
    assert nb.DRAM_SEG == nb.nixl_mem_t.DRAM_SEG and nb.FILE_SEG == 4 and nb.NIXL_WRITE == 1
    assert nb.NIXL_THREAD_SYNC_STRICT == nb.nixl_thread_sync_t.NIXL_THREAD_SYNC_STRICT
    assert nb.NIXL_ERR_NOT_FOUND == -4 and nb.status_str(-12) == "NIXL_ERR_NO_TELEMETRY"
    for cls in (nb.nixlNotFoundError, nb.nixlInvalidParamError, nb.nixlBackendError, nb.nixlNoTelemetryError):
        assert issubclass(cls, Exception) and cls.__module__ == nb.__name__
    assert str(nb.nixlNotFoundError("why")) == "NIXL_ERR_NOT_FOUND: why"


def test_descriptor_lists():
    x = nb.nixlXferDList(nb.DRAM_SEG, [(1, 2, 0), (3, 4, 0)])
    assert x.descCount() == len(x) == 2 and x[1] == (3, 4, 0) and not x.isEmpty()
    x.append((5, 6, 0))
    assert x.index((5, 6, 0)) == 2
    x.remDesc(0)
    assert x.descs() == [(3, 4, 0), (5, 6, 0)]
    with pytest.raises(nb.nixlNotFoundError):
        x.index((9, 9, 9))
    with pytest.raises(ValueError, match="exactly 3"):
        nb.nixlXferDList(nb.DRAM_SEG, [(1, 2)])
    with pytest.raises(TypeError, match="must be a tuple"):
        nb.nixlXferDList(nb.DRAM_SEG, [[1, 2, 0]])
    with pytest.raises(TypeError, match="not str"):
        nb.nixlXferDList(nb.DRAM_SEG, "descs")
    r = nb.nixlRegDList(nb.DRAM_SEG, [(1, 2, 0, "m")])
    assert r[0] == (1, 2, 0, b"m") and r.trim() == nb.nixlXferDList(nb.DRAM_SEG, [(1, 2, 0)])
    rows = np.array([[10, 20, 0], [30, 40, 0]], dtype=np.uint64)
    assert nb.nixlXferDList(nb.DRAM_SEG, rows).descs() == [(10, 20, 0), (30, 40, 0)]
    assert len(nb.nixlRegDList(nb.VRAM_SEG, 3)) == 3
    import pickle
    assert pickle.loads(pickle.dumps(x)) == x


def test_utils_malloc_and_free():
    p = _utils.malloc_passthru(10000)
    assert p % 4096 == 0
    _utils.ba_buf(p, 10000)
    q = _utils.malloc_passthru(10000)
    _utils.ba_buf(q, 10000)
    _utils.verify_transfer(p, q, 10000)
    _utils.free_passthru(q)
    _utils.free_passthru(p)


# -- get_reg_descs / get_xfer_descs ---------------------------------------------------------------

def test_descs_from_tuples_need_a_memory_type_and_the_right_width(caplog):
    a = agent()
    assert a.get_xfer_descs([(1, 2, 0)], "DRAM").getType() == nb.DRAM_SEG
    assert a.get_reg_descs([(1, 2, 0, "")], "cpu").descCount() == 1
    with caplog.at_level(logging.ERROR, logger="wireless_comm.nixl"):
        assert a.get_xfer_descs([(1, 2, 0)]) is None
        assert "mem type" in caplog.text
        assert a.get_xfer_descs([(1, 2, 0, "")], "DRAM") is None
        assert a.get_reg_descs([(1, 2, 0)], "DRAM") is None
        assert "4-tuple list needed for registration" in caplog.text
    with pytest.raises(KeyError):
        a.get_xfer_descs([(1, 2, 0)], "HBM")
    assert a.get_xfer_descs(nb.nixlRegDList(nb.DRAM_SEG, [])) is None  # a reg list where a transfer list belongs


def test_descs_from_tensors_and_arrays():
    torch = pytest.importorskip("torch")
    a = agent()
    t = torch.arange(64, dtype=torch.float32)
    d = a.get_xfer_descs(t)
    assert d.getType() == nb.DRAM_SEG and d[0] == (t.data_ptr(), 256, 0)
    assert a.get_reg_descs([t, t[:8]]).descCount() == 2
    assert a.get_xfer_descs(t.view(8, 8).t()) is None  # non-contiguous
    arr = np.zeros((4, 5), np.float64)
    assert a.get_reg_descs(arr)[0] == (addr(arr), arr.nbytes, 0, b"")
    assert a.get_xfer_descs(arr[:, ::2]) is None  # non-contiguous
    rows = np.array([[addr(arr), 8, 0]], dtype=np.uint64)  # NIXL's Nx3 descriptor rows
    assert a.get_xfer_descs(rows, "DRAM")[0] == (addr(arr), 8, 0)
    assert a.get_xfer_descs(rows) is None  # rows need a memory type


def test_none_memory_type_is_a_clear_error_or_the_documented_default(monkeypatch):
    a = agent()
    buf = np.zeros(4096, np.uint8)
    with pytest.raises(nb.nixlInvalidParamError, match="memory type is needed"):
        a.register_memory([(addr(buf), 4096, 0, "")], None)  # vLLM's CPU platforms pass None
    b = agent(default_mem_type="DRAM")
    assert b.register_memory([(addr(buf), 4096, 0, "")], None).getType() == nb.DRAM_SEG
    monkeypatch.setenv("WCOMM_NIXL_DEFAULT_MEM_TYPE", "cpu")
    assert agent().get_reg_descs([(addr(buf), 4096, 0, "")], None) is not None
    with pytest.raises(KeyError):
        nixl_agent_config(default_mem_type="HBM")


def test_device_memory_and_storage_are_refused_with_the_reason():
    a = agent()
    for seg in ("VRAM", "cuda", "FILE", "BLOCK", "OBJ"):
        with pytest.raises(nb.nixlNotSupportedError, match="host memory .DRAM_SEG. only"):
            a.register_memory([(4096, 4096, 0, "")], seg)
        with pytest.raises(nb.nixlNotSupportedError, match="host memory"):
            a.prep_xfer_dlist("NIXL_INIT_AGENT", [(4096, 4096, 0)], seg)


def test_register_deregister_and_query_memory():
    a = agent()
    buf = np.zeros(8192, np.uint8)
    reg = a.register_memory(buf)
    q = a.query_memory([(addr(buf) + 100, 10, 0, ""), (16, 8, 0, "")], "cma", "DRAM")
    assert q[0]["mem_type"] == "DRAM_SEG" and q[1] is None
    with pytest.raises(ValueError, match="Backend 'UCX' not found"):
        a.query_memory(reg, "UCX")
    a.deregister_memory(reg)
    with pytest.raises(nb.nixlNotFoundError):
        a.deregister_memory(reg)
    with pytest.raises(KeyError):
        a.register_memory(buf, backends=["GDS"])


# -- backends -------------------------------------------------------------------------------------

def test_backends_plugins_and_unknown_names():
    a = agent(backends=[])
    plugins = a.get_plugin_list()
    assert {"UCX", "cma", "tcp"} <= set(plugins)
    assert a.get_plugin_mem_types("UCX") == ["DRAM_SEG"] and a.get_plugin_mem_types("GDS") == []
    assert "num_threads" in a.get_plugin_params("UCX")
    assert a.get_backend_mem_types("UCX") == []
    with pytest.raises(nb.nixlNotFoundError, match="GDS"):
        a.create_backend("GDS")
    with pytest.raises(nb.nixlNotFoundError, match="create_backend"):
        a.get_agent_metadata()  # no backend yet
    a.create_backend("UCX", {"num_threads": "3"})
    assert a.get_backend_mem_types("UCX") == ["DRAM_SEG"] and a.get_backend_params("UCX")["num_threads"] == "3"
    with pytest.raises(nb.nixlInvalidParamError, match="already"):
        a.create_backend("UCX")
    a.register_memory(np.zeros(4096, np.uint8))
    a.create_backend("tcp")  # UCX's engine (auto) already includes tcp
    pinned = agent(backends=["cma"])
    pinned.register_memory(np.zeros(4096, np.uint8))
    with pytest.raises(nb.nixlNotAllowedError, match="one engine"):
        pinned.create_backend("ucx")  # would need another engine than the cma one running
    assert agent(backends=["NOPE"]).backends == {}  # skipped with a warning, as NIXL


# -- transfers ------------------------------------------------------------------------------------

def wait(a, h, limit=10.0) -> str:
    return a.wait_xfer(h, limit)


def test_prepped_write_and_read_by_index_with_telemetry(pair):
    a, b, src, dst = pair
    local = a.prep_xfer_dlist("NIXL_INIT_AGENT", blocks(src, 256), "DRAM")
    remote = a.prep_xfer_dlist(b.name.encode(), blocks(dst, 256), "DRAM")
    h = a.make_prepped_xfer("WRITE", local, [0, 1, 2, 9], remote, [10, 11, 12, 40])
    assert a.transfer(h) in ("PROC", "DONE") and wait(a, h) == "DONE"
    assert np.array_equal(dst[10 * 4096:13 * 4096], src[:3 * 4096])
    assert np.array_equal(dst[40 * 4096:41 * 4096], src[9 * 4096:10 * 4096])
    t = a.get_xfer_telemetry(h)
    assert t.descCount == 2 and t.totalBytes == 4 * 4096 and t.backendName == "cma"  # 3 contiguous pairs merged
    assert t.startTime > 0 and t.xferDuration >= t.postDuration >= 0
    assert a.query_xfer_backend(h) == "cma"
    assert a.transfer(h) and wait(a, h) == "DONE"  # a finished handle may be posted again
    a.release_xfer_handle(h)

    dst[:4096] = 7
    h = a.make_prepped_xfer("READ", local, np.array([100], np.int32), remote, np.array([0], np.int32))
    a.transfer(h)
    assert wait(a, h) == "DONE" and (src[100 * 4096:101 * 4096] == 7).all()
    h.release()
    a.release_dlist_handle(local)
    a.release_dlist_handle(remote)


def test_initialize_xfer_and_loopback(pair):
    a, b, src, dst = pair
    h = a.initialize_xfer("WRITE", a.get_xfer_descs(blocks(src, 1), "DRAM"),
                          a.get_xfer_descs([(addr(dst) + 8192, 4096, 0)], "DRAM"), b.name)
    a.transfer(h)
    assert wait(a, h) == "DONE" and np.array_equal(dst[8192:12288], src[:4096])
    # loopback: the remote side prepared with this agent's own name
    local = a.prep_xfer_dlist("", blocks(src, 2), "DRAM")
    loop = a.prep_xfer_dlist(a.name, [(addr(src) + 65536, 8192, 0)], "DRAM")
    with pytest.raises(nb.nixlInvalidParamError, match="differs"):
        a.make_prepped_xfer("WRITE", local, [0, 1], loop, [0, 0]) and None  # 4096 vs 8192 bytes
    local2 = a.prep_xfer_dlist("", [(addr(src), 8192, 0)], "DRAM")
    h = a.make_prepped_xfer("WRITE", local2, [0], loop, [0], notif_msg=b"self")
    assert a.transfer(h) == "DONE" and a.check_xfer_state(h) == "DONE"
    assert np.array_equal(src[65536:65536 + 8192], src[:8192])
    assert a.get_new_notifs() == {a.name: [b"self"]}


def test_bad_input_to_transfers(pair):
    a, b, src, dst = pair
    local = a.prep_xfer_dlist("NIXL_INIT_AGENT", blocks(src, 4), "DRAM")
    remote = a.prep_xfer_dlist(b.name, blocks(dst, 4), "DRAM")
    with pytest.raises(KeyError):
        a.make_prepped_xfer("COPY", local, [0], remote, [0])
    with pytest.raises(nb.nixlInvalidParamError, match="out of range"):
        a.make_prepped_xfer("WRITE", local, [4], remote, [0])
    with pytest.raises(nb.nixlInvalidParamError, match="2 local indices and 1 remote"):
        a.make_prepped_xfer("WRITE", local, [0, 1], remote, [0])
    with pytest.raises(nb.nixlInvalidParamError, match="NIXL_INIT_AGENT"):
        a.make_prepped_xfer("WRITE", remote, [0], local, [0])
    with pytest.raises(nb.nixlNotFoundError, match="not inside memory"):
        a.prep_xfer_dlist("NIXL_INIT_AGENT", [(16, 8, 0)], "DRAM")
    with pytest.raises(nb.nixlNotFoundError, match="no remote agent 'ghost'"):
        a.prep_xfer_dlist("ghost", blocks(dst, 1), "DRAM")
    with pytest.raises(nb.nixlInvalidParamError, match="no descriptors"):
        a.prep_xfer_dlist("ghost", [(1, 2, 0)])  # no memory type
    h = a.make_prepped_xfer("WRITE", local, [0], remote, [0])
    with pytest.raises(nb.nixlNotPostedError):
        a.check_xfer_state(h)
    # remote descriptors outside the remote's registered memory fail at transfer, with the reason
    outside = a.prep_xfer_dlist(b.name, [(addr(dst) + (1 << 20) - 10, 4096, 0)], "DRAM")
    with pytest.raises(nb.nixlInvalidParamError, match="not inside memory agent"):
        a.transfer(a.make_prepped_xfer("WRITE", local, [0], outside, [0]))


def test_released_handles_refuse_reuse(pair):
    a, b, src, dst = pair
    local = a.prep_xfer_dlist("NIXL_INIT_AGENT", blocks(src, 1), "DRAM")
    remote = a.prep_xfer_dlist(b.name, blocks(dst, 1), "DRAM")
    h = a.make_prepped_xfer("WRITE", local, [0], remote, [0])
    a.transfer(h)
    wait(a, h)
    a.release_xfer_handle(h)
    a.release_xfer_handle(h)  # idempotent, as NIXL's
    for call in (lambda: a.transfer(h), lambda: a.check_xfer_state(h), lambda: a.get_xfer_telemetry(h)):
        with pytest.raises(nb.nixlInvalidParamError, match="was released"):
            call()
    a.release_dlist_handle(remote)
    with pytest.raises(nb.nixlInvalidParamError, match="was released"):
        a.make_prepped_xfer("WRITE", local, [0], remote, [0])
    with pytest.raises(nb.nixlInvalidParamError, match="belongs to agent"):
        b.transfer(a.make_prepped_xfer("WRITE", local, [0], a.prep_xfer_dlist(b.name, blocks(dst, 1), "DRAM"), [0]))


def test_repost_while_in_flight_is_refused(pair):
    a, b, src, dst = pair
    big_src, big_dst = np.ones(64 << 20, np.uint8), np.zeros(64 << 20, np.uint8)
    a.register_memory(big_src)
    b.register_memory(big_dst)
    a.add_remote_agent(b.get_agent_metadata())  # b's metadata now has the new region
    h = a.initialize_xfer("WRITE", a.get_xfer_descs(big_src), a.get_xfer_descs(big_dst), b.name)
    assert a.transfer(h) == "PROC"
    if a.check_xfer_state(h) == "PROC":  # a 64 MiB copy takes milliseconds
        with pytest.raises(nb.nixlRepostActiveError):
            a.transfer(h)
    assert wait(a, h) == "DONE" and big_dst[-1] == 1


def test_removed_remote_fails_with_not_found(pair):
    a, b, src, dst = pair
    local = a.prep_xfer_dlist("NIXL_INIT_AGENT", blocks(src, 1), "DRAM")
    remote = a.prep_xfer_dlist(b.name, blocks(dst, 1), "DRAM")
    h = a.make_prepped_xfer("WRITE", local, [0], remote, [0])
    a.remove_remote_agent(b.name.encode())
    assert not a.check_remote_metadata(b.name)
    with pytest.raises(nb.nixlNotFoundError, match="no remote agent"):
        a.transfer(h)
    with pytest.raises(nb.nixlNotFoundError):
        a.remove_remote_agent(b.name)
    with pytest.raises(nb.nixlNotFoundError):
        a.make_connection(b.name)
    with pytest.raises(nb.nixlNotFoundError):
        a.send_notif(b.name, b"x")


def test_telemetry_off_raises_no_telemetry(pair):
    a, b, src, dst = pair
    h = b.initialize_xfer("READ", b.get_xfer_descs(blocks(dst, 1), "DRAM"), b.get_xfer_descs(blocks(dst, 1), "DRAM"),
                          b.name)
    b.transfer(h)
    with pytest.raises(nb.nixlNoTelemetryError, match="capture_telemetry"):
        b.get_xfer_telemetry(h)


def test_a_transfer_past_its_timeout_is_err_with_the_reason():
    a, b = agent(timeout=0.001), agent()
    src, dst = np.ones(256 << 20, np.uint8), np.zeros(256 << 20, np.uint8)
    a.register_memory(src)
    b.register_memory(dst)
    a.add_remote_agent(b.get_agent_metadata())
    hs = [a.initialize_xfer("WRITE", a.get_xfer_descs(src), a.get_xfer_descs(dst), b.name) for _ in range(4)]
    for h in hs:
        a.transfer(h)
    states = [a.wait_xfer(h, 20) for h in hs]
    assert "ERR" in states, states  # four 256 MiB copies cannot all finish within a millisecond
    h = hs[states.index("ERR")]
    assert "timed out" in a.get_xfer_error(h)
    for h in hs:
        a.release_xfer_handle(h)


# -- notifications and metadata within one process ------------------------------------------------

def test_notifications_between_two_agents(pair):
    a, b, src, dst = pair
    b.add_remote_agent(a.get_agent_metadata())
    a.send_notif(b.name, b"hello")
    h = a.initialize_xfer("WRITE", a.get_xfer_descs(blocks(src, 1), "DRAM"), a.get_xfer_descs(blocks(dst, 1), "DRAM"),
                          b.name, notif_msg=b"item-7")
    a.transfer(h)
    assert wait(a, h) == "DONE"
    import time
    deadline = time.monotonic() + 10
    while not b.check_remote_xfer_done(a.name, b"item", tag_is_prefix=True) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert b.notifs[a.name] == [b"hello"]
    assert b.check_remote_xfer_done(a.name, b"ell", tag_is_prefix=False)
    assert not b.check_remote_xfer_done(a.name, b"hello")
    a.transfer(h, notif_msg="again")  # a str works too, arriving as bytes
    wait(a, h)
    got = {}
    while not got and time.monotonic() < deadline:
        got = b.get_new_notifs()
    assert got == {a.name: [b"again"]}


def test_listener_exchanges_metadata_in_one_process():
    a = agent(enable_listen_thread=True, timeout=10)
    b = agent(enable_listen_thread=True, timeout=10)
    buf = np.zeros(4096, np.uint8)
    b.register_memory(buf)
    a.fetch_remote_metadata(b.name, "127.0.0.1", b.listen_port)
    import time
    deadline = time.monotonic() + 10
    while not a.check_remote_metadata(b.name) and time.monotonic() < deadline:
        time.sleep(0.01)
    # (Only now: a's fetch, on a's request thread, must not load b's metadata again after b's
    # invalidation below. b's own send and invalidation go in that order.)
    b.send_local_metadata("127.0.0.1", a.listen_port)  # a gets b's metadata pushed too; loading twice is a no-op
    assert a.check_remote_metadata(b.name, a.get_xfer_descs([(addr(buf), 4096, 0)], "DRAM"))
    assert not a.check_remote_metadata(b.name, a.get_xfer_descs([(addr(buf), 8192, 0)], "DRAM"))
    b.invalidate_local_metadata()  # at every listener it sent to
    while a.check_remote_metadata(b.name) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not a.check_remote_metadata(b.name)
    with pytest.raises(nb.nixlNotSupportedError, match="central metadata server"):
        a.send_local_metadata()
    a.fetch_remote_metadata("someone-else", "127.0.0.1", b.listen_port)
    while not a.metadata_errors and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "serves agent" in a.metadata_errors[0]
    a.close()
    b.close()


def test_fetch_from_nobody_is_bounded_and_reported():
    a = agent(timeout=0.5)
    from helpers import free_port
    a.fetch_remote_metadata("ghost", "127.0.0.1", free_port())
    import time
    deadline = time.monotonic() + 10
    while not a.metadata_errors and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "no answer from the metadata listener" in a.metadata_errors[0]


def test_listener_survives_bad_requests():
    import socket
    import struct
    from wireless_comm.nixl import _listener
    a = agent(enable_listen_thread=True, timeout=5)
    with socket.create_connection(("127.0.0.1", a.listen_port), timeout=5) as s:
        s.sendall(struct.pack(">I", 0))  # an empty frame: dropped, logged
        assert s.recv(1) == b""
    with pytest.raises(_listener.ListenerError, match="unknown listener request"):
        _listener.request("127.0.0.1", a.listen_port, b"Z", b"", 5)
    with pytest.raises(_listener.ListenerError, match="bad agent metadata"):
        _listener.request("127.0.0.1", a.listen_port, b"S", b"not metadata", 5)
    assert _listener.request("127.0.0.1", a.listen_port, b"F", a.name.encode(), 5) == a.get_agent_metadata()
    a.close()


def test_an_agents_listener_requests_reach_a_listener_in_the_order_made():
    # A hand-made listener holds its reply to the first request (b's send_local_metadata) for
    # 0.3 s. b's invalidation must not reach it meanwhile: on a thread of its own, as each
    # request once ran, it could arrive first, and the peer would be left with b's metadata.
    import socket
    import struct
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(5)
    port = server.getsockname()[1]
    # (timeout: how long b waits for each reply. Any value well over the 0.3 s hold is the
    # contract; 10 s only guards the test against a reply that never comes.)
    b = agent(timeout=10)
    try:
        b.send_local_metadata("127.0.0.1", port)
        b.invalidate_local_metadata("127.0.0.1", port)
        ops = []
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                conn.settimeout(5)
                (n,) = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))
                body = conn.recv(n, socket.MSG_WAITALL)
                ops.append(body[:1])
                if body[:1] == b"S":
                    server.settimeout(0.3)  # a second request now would come before this reply
                    try:
                        early, _ = server.accept()
                        early.close()
                        ops.append(b"early")
                    except socket.timeout:
                        pass
                    server.settimeout(5)
                    reply = b"K" + b.name.encode()
                else:
                    reply = b"K"
                conn.sendall(struct.pack(">I", len(reply)) + reply)
        assert ops == [b"S", b"I"]
        assert not b.metadata_errors
    finally:
        b.close()
        server.close()
