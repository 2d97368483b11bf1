"""The deployment anchor lock across processes and backends: a second conductor is refused at
once naming the holder's pid; a SIGKILLed conductor frees the deployment."""
import pytest

from mesh_util import entity, finish, wait_ready


@pytest.mark.parametrize("first,second", [("pyzmq", "native"), ("native", "pyzmq"), ("wcomm", "wcomm")])
def test_second_conductor_refused_then_freed_after_sigkill(tmp_path, first, second):
    prefix = str(tmp_path / "ipc") + "/"
    proto = lambda b: "SHM" if b == "wcomm" else "IPC"  # noqa: E731
    holder = entity(first, proto(first), prefix, "conductor", "worker_0", "anchor")
    wait_ready(holder)
    rival = entity(second, proto(second), prefix, "conductor", "worker_0", "anchor")
    code, _, err = finish(rival)
    assert code != 0
    assert f"held by pid {holder.pid}" in err, err
    holder.kill()
    holder.wait(timeout=10)
    finish(holder)
    third = entity(second, proto(second), prefix, "conductor", "worker_0", "anchor")
    wait_ready(third)
    third.kill()
    finish(third)
