"""The two-entity deadlock, in two processes per backend: both send 64 KiB messages to each
other in bursts at a high-water mark of 1 while reading between bursts. Through
OutboxCommunicator both complete; with blocking sends both stall (shown by a bounded wait)."""
import subprocess

import pytest

from mesh_util import BACKENDS, entity, finish, protocol_for


def start(tmp_path, backend, how, n=1000):
    prefix = str(tmp_path / "ipc") + "/"
    args = ["flood", n, 65536, 1, how]
    a = entity(backend, protocol_for(backend), prefix, "worker_0", "worker_1", *args)
    b = entity(backend, protocol_for(backend), prefix, "worker_1", "worker_0", *args)
    return a, b


@pytest.mark.parametrize("backend", BACKENDS)
def test_outbox_completes(tmp_path, backend):
    a, b = start(tmp_path, backend, "outbox")
    for p in (a, b):
        code, out, err = finish(p, timeout=60)
        assert code == 0 and "done" in out, err[-2000:]


@pytest.mark.parametrize("backend", BACKENDS)
def test_blocking_sends_stall(tmp_path, backend):
    a, b = start(tmp_path, backend, "blocking")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            a.wait(timeout=3)  # stalled: a finished flood exits well within this
        assert b.poll() is None
    finally:
        for p in (a, b):
            p.kill()
            _, out, err = finish(p)
            assert "done" not in out
            assert "sent 1000 " not in err  # stuck before the last burst went out
