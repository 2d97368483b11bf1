"""`wcomm cluster launch --launcher slurm` on a one-machine Slurm started by the test (munged,
slurmctld, slurmd; cluster_batch.py) and `--launcher mpirun` with a hostfile naming localhost
slots: the same four-rank job and report as over SSH, ranks bootstrapped from the launcher's
environment, and a rank killed mid-run named in the report with nothing left running."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from cluster_batch import Slurm, free_port, rank_processes, wait_for
from cluster_net import WCOMM

pytestmark = pytest.mark.skipif(not os.access(WCOMM, os.X_OK), reason=f"{WCOMM} is not built")

REPORT_KEYS = {"schema_version", "started_at", "finished_at", "mode", "physical_node_count", "world_size", "ring",
               "settings", "nodes", "rank_results", "collective_summary", "launch"}


def topology(tmp_path, rounds=3, collectives=("barrier", "broadcast", "allgather", "ring_allreduce")):
    path = tmp_path / "cluster.yaml"
    path.write_text(f"""controller: node-a
base_port: {free_port()}
nodes:
  - {{node_id: node-a, host: 127.0.0.1, ranks: [0, 1], ssh_alias: localhost, interface: lo}}
  - {{node_id: node-b, host: 127.0.0.1, ranks: [2, 3], ssh_alias: localhost, interface: lo}}
ring: [0, 3, 1, 2]
benchmark:
  payload_sizes: [1024, 4096]
  rounds: {rounds}
  warmup_rounds: 1
  collectives: [{', '.join(collectives)}]
  timeout: 30
""")
    return str(path)


def launch(config, *args, env=None):
    return subprocess.Popen([WCOMM, "cluster", "launch", "--config", config, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def check_report(report, launcher):
    assert REPORT_KEYS <= set(report), set(report)
    assert report["world_size"] == 4 and report["ring"] == [0, 3, 1, 2] and report["launcher"] == launcher
    assert [r["rank"] for r in report["rank_results"]] == [0, 1, 2, 3]
    assert set(report["collective_summary"]) == {"barrier", "broadcast", "allgather", "ring_allreduce"}
    assert report["collective_summary"]["ring_allreduce"]["4096"]["collective_completion_ms"]["sample_count"] == 3
    (node, side), = report["nodes"].items()  # one machine: one node, every rank on it, its diagnostics
    assert side["local_ranks"] == [0, 1, 2, 3] and side["environment_before"]["kernel_network_counters"] is not None


# The kill tests' jobs: the first measurement (MID_RUN_ROUNDS barriers) must end well inside the
# launch's 60 s, and the two broadcast cells after it must still be running when the test kills a
# rank a moment later (if the job ended first, the report would not name a failure, and the
# test fails). With 20000 rounds the first cell alone took over 55 s beside two busy loops (the
# job was cut off by its timeout before the kill: item 6's loaded rounds). 2000 are a tenth of that
# work: the three kill tests took 12 s together on a quiet machine, and passed in three loaded rounds.
MID_RUN_ROUNDS = 2000


def kill_a_rank_mid_run(p, config, variable):
    ranks = wait_for(lambda: (lambda r: r if len(r) == 4 else None)(rank_processes(config, variable)))
    assert ranks and len(ranks) == 4, ranks
    for line in p.stderr:  # mid-run: rank 0 has finished its first measurement
        if "rank 0 barrier 0 B" in line:
            break
    os.kill(ranks[2], signal.SIGKILL)
    out, err = p.communicate(timeout=60)
    return json.loads(out), err


@pytest.fixture(scope="module")
def slurm():
    try:
        cluster = Slurm()
    except RuntimeError as e:
        print(f"Slurm daemons could not start: {e}")
        pytest.skip(f"Slurm daemons could not start: {e}")
    yield cluster
    cluster.close()


def test_slurm_runs_the_job_with_4_tasks(slurm, tmp_path):
    config = topology(tmp_path)
    env = dict(slurm.env, MASTER_ADDR="127.0.0.1")  # rank 0's address: the node name wclnode does not resolve
    dry = subprocess.run([WCOMM, "cluster", "launch", "--config", config, "--launcher", "slurm", "--dry-run"],
                         capture_output=True, text=True, timeout=30)
    plan = json.loads(dry.stdout)
    assert plan["command"][:3] == ["srun", "--ntasks", "4"] and plan["command"][-3:] == ["rank", "--config", config]
    p = launch(config, "--launcher", "slurm", "--timeout", "60", env=env)
    out, err = p.communicate(timeout=90)
    assert p.returncode == 0, err
    report = json.loads(out)
    check_report(report, "slurm")
    assert list(report["nodes"]) == ["wclnode"]
    assert report["launch"]["command"] == plan["command"]  # what ran is what --dry-run printed
    assert "all 4 ranks listening" in err and re.search(r"\(7/7 done", err)


def test_slurm_rank_killed_mid_run_is_named_and_the_job_stopped(slurm, tmp_path):
    config = topology(tmp_path, rounds=MID_RUN_ROUNDS, collectives=("barrier", "broadcast"))
    p = launch(config, "--launcher", "slurm", "--timeout", "60", env=dict(slurm.env, MASTER_ADDR="127.0.0.1"))
    report, err = kill_a_rank_mid_run(p, config, "SLURM_PROCID")
    assert p.returncode == 1, err
    assert report["failure"]["node"] == "wclnode" and report["failure"]["reason"].startswith("rank 2: "), report["failure"]
    assert wait_for(lambda: not rank_processes(config, "SLURM_PROCID"), 10), "ranks left running"
    assert slurm.running() == ["slurmd", "slurmctld", "munged"] or sorted(slurm.running()) == ["munged", "slurmctld", "slurmd"]


def test_mpirun_with_a_localhost_hostfile_runs_the_job(tmp_path):
    config = topology(tmp_path)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=4\n")
    p = launch(config, "--launcher", "mpirun", "--hostfile", str(hostfile), "--timeout", "60")
    out, err = p.communicate(timeout=90)
    assert p.returncode == 0, err
    report = json.loads(out)
    check_report(report, "openmpi")
    cmd = report["launch"]["command"]
    assert cmd[:3] == ["mpirun", "-np", "4"] and cmd[cmd.index("--hostfile") + 1] == str(hostfile)
    assert (os.geteuid() != 0) or "--allow-run-as-root" in cmd


def test_mpirun_rank_killed_mid_run_is_named_and_the_job_stopped(tmp_path):
    config = topology(tmp_path, rounds=MID_RUN_ROUNDS, collectives=("barrier", "broadcast"))
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=4\n")
    p = launch(config, "--launcher", "mpirun", "--hostfile", str(hostfile), "--timeout", "60")
    report, err = kill_a_rank_mid_run(p, config, "OMPI_COMM_WORLD_RANK")
    what = json.dumps(report, indent=1) + "\n--- the launcher's stderr ---\n" + err  # what each part said
    assert p.returncode == 1, what
    assert report["failure"]["reason"].startswith("rank 2: "), what
    assert "signal 9" in report["failure"]["reason"] or "Killed" in report["failure"]["reason"], what
    assert wait_for(lambda: not rank_processes(config, "OMPI_COMM_WORLD_RANK"), 10), "ranks left running"


def test_missing_hostfile_stops_before_starting(tmp_path):
    r = subprocess.run([WCOMM, "cluster", "launch", "--config", topology(tmp_path), "--launcher", "mpirun", "--hostfile",
                        str(tmp_path / "nope")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--hostfile" in r.stderr and "does not exist" in r.stderr


def test_a_rank_started_in_a_world_of_another_size_says_so(tmp_path):
    env = dict(os.environ, OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_SIZE="2",
               OMPI_COMM_WORLD_NODE_NAME="n7", MASTER_PORT=str(free_port()))
    r = subprocess.run([WCOMM, "cluster", "rank", "--config", topology(tmp_path)], capture_output=True, text=True,
                       env=env, timeout=30)
    assert r.returncode == 1
    assert "cluster rank 1 on n7: error: the launcher started 2 ranks (openmpi) but the topology" in r.stderr
    assert "has 4" in r.stderr
