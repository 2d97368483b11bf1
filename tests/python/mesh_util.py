"""Helpers of the mesh tests: run a mesh entity process, wait for its "ready", the pyzmq
entity of tests/mesh (written from the wire description alone)."""
import os
import select
import subprocess
import sys

from helpers import REPO, child_env

HERE = os.path.dirname(os.path.abspath(__file__))
PYZMQ_ENTITY = os.path.join(REPO, "tests", "mesh", "pyzmq_entity.py")
MESH_ENTITY = os.path.join(HERE, "mesh_entity.py")
BACKENDS = ["pyzmq", "native", "wcomm"]


def spawn(args, env=None) -> subprocess.Popen:
    e = child_env()
    e.update(env or {})
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=e)


def entity(*args, env=None) -> subprocess.Popen:
    return spawn([MESH_ENTITY, *map(str, args)], env)


def wait_ready(p: subprocess.Popen, timeout: float = 30) -> None:
    """Until the child prints "ready" (its first line); fails if it exits or stays silent."""
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    if not ready:
        p.kill()
        raise AssertionError(f"no 'ready' within {timeout} s: {p.communicate()[1]}")
    line = p.stdout.readline()  # the child prints ready or exits (then: "")
    assert line.strip() == "ready", f"child said {line!r}: {p.stderr.read() if p.poll() is not None else ''}"


def finish(p: subprocess.Popen, timeout: float = 30) -> tuple:
    """(returncode, stdout, stderr), killing the child if it is not done within timeout."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, out, err
    return p.returncode, out, err


def protocol_for(backend: str) -> str:
    return "SHM" if backend == "wcomm" else "IPC"
