"""A one-machine Slurm for the cluster launcher tests: munged, slurmctld and slurmd started from
a generated slurm.conf and munge key (node wclnode with 4 CPUs, one partition), all under one
temporary directory, stopped and removed by close(). Also finds the rank processes of a running
`wcomm cluster rank` job."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Dict, List, Optional

from helpers import free_port


class Slurm:
    """Raises RuntimeError with the daemons' own words when they cannot start."""

    def __init__(self) -> None:
        for tool in ("munged", "slurmctld", "slurmd", "srun", "sinfo"):
            if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
                raise RuntimeError(f"{tool} is not installed (scripts/bootstrap.sh installs munge and slurm)")
        self.dir = tempfile.mkdtemp(prefix="wcl-slurm-")
        self.procs: Dict[str, subprocess.Popen] = {}
        d = self.dir
        os.chmod(d, 0o755)  # munged wants its socket's directory searchable by all
        os.makedirs(f"{d}/state")
        os.makedirs(f"{d}/spool")
        with open(f"{d}/munge.key", "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(f"{d}/munge.key", 0o400)
        host = socket.gethostname().split(".")[0]
        conf = {
            "ClusterName": "wcl", "SlurmctldHost": f"{host}(127.0.0.1)", "SlurmctldPort": str(free_port()),
            "SlurmdPort": str(free_port()), "AuthType": "auth/munge", "AuthInfo": f"socket={d}/munge.sock",
            "CredType": "cred/munge", "SlurmUser": "root", "SlurmdUser": "root", "StateSaveLocation": f"{d}/state",
            "SlurmdSpoolDir": f"{d}/spool", "SlurmctldPidFile": f"{d}/slurmctld.pid", "SlurmdPidFile": f"{d}/slurmd.pid",
            "SlurmctldLogFile": f"{d}/slurmctld.log", "SlurmdLogFile": f"{d}/slurmd.log",
            "ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none", "SchedulerType": "sched/builtin",
            "SelectType": "select/cons_tres", "SelectTypeParameters": "CR_Core", "ReturnToService": "2",
            "MpiDefault": "none", "JobCompType": "jobcomp/none", "AccountingStorageType": "accounting_storage/none",
            "JobAcctGatherType": "jobacct_gather/none", "SlurmdParameters": "config_overrides",
            "PlugStackConfig": "/dev/null",
        }
        with open(f"{d}/slurm.conf", "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
            f.write(f"NodeName=wclnode NodeHostname={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n"
                    "PartitionName=wcl Nodes=wclnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n")
        self.env = dict(os.environ, SLURM_CONF=f"{d}/slurm.conf")
        try:
            self._start("munged", ["munged", "-F", "-f", f"--socket={d}/munge.sock", f"--key-file={d}/munge.key",
                                   f"--log-file={d}/munged.log", f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed"],
                        ready=lambda: os.path.exists(f"{d}/munge.sock"))
            self._start("slurmctld", ["slurmctld", "-D", "-c", "-f", f"{d}/slurm.conf"], ready=self._answers)
            self._start("slurmd", ["slurmd", "-D", "-N", "wclnode", "-f", f"{d}/slurm.conf"], ready=self._node_idle)
        except BaseException:
            self.close()
            raise

    def _start(self, name: str, argv: List[str], ready) -> None:
        out = open(f"{self.dir}/{name}.out", "w")
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited at start: {self._tail(name)}")
            if ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{name} did not become ready in 30 s: {self._tail(name)}")

    def _tail(self, name: str) -> str:
        text = ""
        for f in (f"{self.dir}/{name}.out", f"{self.dir}/{name}.log"):
            if os.path.exists(f):
                text += open(f).read()[-1500:]
        return text

    def _sinfo(self) -> str:
        r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else ""

    def _answers(self) -> bool:
        return self._sinfo() != ""

    def _node_idle(self) -> bool:
        return self._sinfo() == "idle"

    def close(self) -> None:
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.pop(name, None)
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)

    def running(self) -> List[str]:
        return [n for n, p in self.procs.items() if p.poll() is None]


def rank_processes(config: str, rank_variable: str) -> Dict[int, int]:
    """rank -> pid of the `wcomm cluster rank --config CONFIG` processes running now."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if b"rank" not in cmd or config.encode() not in cmd:
                continue
            env = dict(e.split(b"=", 1) for e in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in e)
            found[int(env[rank_variable.encode()])] = int(pid)
        except (OSError, KeyError, ValueError):
            continue
    return found


def wait_for(predicate, seconds: float = 30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()
