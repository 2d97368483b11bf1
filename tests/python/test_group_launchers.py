"""4 ranks started by mpirun (Open MPI, --oversubscribe) and by torchrun on localhost join one
wireless_comm.Group from the launcher's environment."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import free_port, free_port_pair

HERE = os.path.dirname(os.path.abspath(__file__))
RANK_MAIN = os.path.join(HERE, "group_rank_main.py")


def check(out, world, source):
    lines = sorted(re.findall(r"ok rank=\d+ world=\d+ source=(?:openmpi|torchrun|slurm)", out))  # ranks' lines may interleave
    assert lines == sorted(f"ok rank={r} world={world} source={source}" for r in range(world)), out


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="openmpi-bin is not installed (scripts/bootstrap.sh)")
def test_four_ranks_under_mpirun():
    env = dict(os.environ, WCOMM_MASTER_PORT=str(free_port()))
    cmd = ["mpirun", "--oversubscribe", "-np", "4", "-x", "WCOMM_MASTER_PORT", "-x", "PYTHONPATH"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    proc = subprocess.run(cmd + ["/usr/bin/python3", RANK_MAIN], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check(proc.stdout, 4, "openmpi")


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun is not installed (python3-torch)")
def test_four_ranks_under_torchrun():
    # torchrun's own code (torch.distributed.run), with one fix: Debian's torch 1.13 parses
    # --redirects / --tee into None under Python 3.11 (its Std enum no longer compares equal to
    # ints), which crashes torchrun before it starts any worker.
    fix = ("import sys, torch.distributed.elastic.multiprocessing.api as a; "
           "a.Std.from_str = classmethod(lambda cls, vm: cls.NONE); "
           "from torch.distributed.run import main; sys.argv[0] = 'torchrun'; main()")
    cmd = ["/usr/bin/python3", "-c", fix, "--nnodes", "1", "--nproc_per_node", "4", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port_pair()), RANK_MAIN]
    proc = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check(proc.stdout, 4, "torchrun")
