"""The mesh examples run end to end: four entity processes serve their requests."""
import os
import subprocess
import sys

import pytest

from helpers import REPO, child_env

PY_EXAMPLE = os.path.join(REPO, "examples", "mesh_inference.py")
CPP_EXAMPLE = os.environ.get("WCOMM_MESH_EXAMPLE") or os.path.join(REPO, "build", "examples", "mesh_inference")


@pytest.mark.parametrize("env", [{"MSTAR_RUST_ZMQ": "0"}, {"MSTAR_RUST_ZMQ": "1"},
                                 {"WCOMM_EXAMPLE_TRANSPORT": "wcomm"}])
def test_python_example(env):
    e = child_env()
    e.update(env)
    r = subprocess.run([sys.executable, PY_EXAMPLE, "4"], capture_output=True, text=True, timeout=60, env=e)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("api_server: request") == 4 and "all entities done" in r.stdout


@pytest.mark.skipif(not os.access(CPP_EXAMPLE, os.X_OK), reason="examples/mesh_inference is not built")
@pytest.mark.parametrize("backend", ["zmq", "wcomm"])
def test_cpp_example(backend):
    r = subprocess.run([CPP_EXAMPLE, backend, "4"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("api_server: request") == 4 and "all entities done" in r.stdout
