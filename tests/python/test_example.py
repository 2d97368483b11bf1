"""examples/p2p_local.py runs and shows the exchange."""

import os
import subprocess

from helpers import PYTHON, REPO, child_env


def test_p2p_local_example():
    done = subprocess.run([PYTHON, os.path.join(REPO, "examples", "p2p_local.py")], capture_output=True,
                          text=True, timeout=60, env=child_env())
    assert done.returncode == 0, done.stderr
    assert "tensor=torch.float32 (3, 224, 224) equal=True piggypayload={'trace_id': 'request-42'}" in done.stdout
    assert "node-a got reply={'ok': True" in done.stdout
