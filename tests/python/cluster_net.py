"""Four SSH hosts for the cluster launcher tests: network namespaces wcl<pid><x> on one bridge
(itself inside namespace wcl<pid>br), addresses 192.0.2.10-13/24, each running Debian's sshd on
its own address with generated keys, plus the ssh config, known_hosts and ssh / scp wrappers
(first in PATH) that log every command they run. Everything lives under one temporary directory
and is removed, with every process and namespace, by close()."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Dict, List, Optional

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WCOMM = os.environ.get("WCOMM_CLI") or os.path.join(REPO, "build", "wcomm")
SSHD = "/usr/sbin/sshd"
NODES = ["a", "b", "c", "d"]
SEP = "\x1f"


def sh(*args: str, timeout: float = 20, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=check)


def unavailable_reason() -> Optional[str]:
    """Why the namespaces cannot be built here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    for tool in (SSHD, "/usr/bin/ssh", "/usr/bin/scp", "/usr/bin/ssh-keygen"):
        if not os.access(tool, os.X_OK):
            return f"{tool} is missing (scripts/bootstrap.sh installs openssh-server)"
    if not os.access(WCOMM, os.X_OK):
        return f"{WCOMM} is not built"
    return None


class SshCluster:
    def __init__(self) -> None:
        self.tag = f"wcl{os.getpid() % 100000}"
        self.dir = tempfile.mkdtemp(prefix=f"{self.tag}-")
        self.bridge_ns = f"{self.tag}br"
        self.ns = {x: f"{self.tag}{x}" for x in NODES}
        self.ip = {x: f"192.0.2.{10 + i}" for i, x in enumerate(NODES)}
        self.sshd: Dict[str, subprocess.Popen] = {}
        self.made_run_sshd = False
        self.log = os.path.join(self.dir, "commands.log")
        try:
            self._network()
            self._keys()
            self._wrappers()
            for x in NODES:
                self.start_sshd(x)
        except BaseException:
            self.close()
            raise

    # -- setup -------------------------------------------------------------------------------
    def _network(self) -> None:
        sh("ip", "netns", "add", self.bridge_ns)
        sh("ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.bridge_ns, "link", "set", "br0", "up")
        for x in NODES:
            ns, port = self.ns[x], f"{self.tag}p{x}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", "name", f"{self.tag}h{x}", "netns", ns, "type", "veth", "peer", "name", port,
               "netns", self.bridge_ns)
            sh("ip", "-n", ns, "link", "set", f"{self.tag}h{x}", "name", "eth0")
            sh("ip", "-n", ns, "addr", "add", f"{self.ip[x]}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", self.bridge_ns, "link", "set", port, "master", "br0")
            sh("ip", "-n", self.bridge_ns, "link", "set", port, "up")

    def _keys(self) -> None:
        d = self.dir
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{d}/host_key")
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{d}/id")
        shutil.copy(f"{d}/id.pub", f"{d}/authorized_keys")
        host_pub = open(f"{d}/host_key.pub").read().split()[:2]
        with open(f"{d}/known_hosts", "w") as f:
            for x in NODES:
                f.write(f"{self.ip[x]} {host_pub[0]} {host_pub[1]}\n")
        with open(f"{d}/ssh_config", "w") as f:
            for x in NODES:
                f.write(f"Host {self.alias(x)}\n  HostName {self.ip[x]}\n")
            f.write(f"Host *\n  User root\n  IdentityFile {d}/id\n  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n"
                    f"  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 5\n  LogLevel ERROR\n")
        for x in NODES:
            os.makedirs(self.workdir(x))
            with open(f"{d}/sshd_{x}.conf", "w") as f:
                f.write(f"ListenAddress {self.ip[x]}\nPort 22\nHostKey {d}/host_key\n"
                        f"AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd_{x}.pid\nStrictModes no\n"
                        f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                        f"PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\nLogLevel VERBOSE\n")
        if not os.path.isdir("/run/sshd"):  # sshd's privilege separation directory
            os.makedirs("/run/sshd", mode=0o755)
            self.made_run_sshd = True

    def _wrappers(self) -> None:
        """ssh and scp first in PATH: log the argv (fields joined by 0x1f), then run the real one
        with the generated config. The line is written with one printf: the launcher runs them in
        parallel, and lines written a field at a time interleave."""
        os.makedirs(f"{self.dir}/bin")
        for tool in ("ssh", "scp"):
            path = f"{self.dir}/bin/{tool}"
            with open(path, "w") as f:
                f.write(f"#!/bin/sh\nsep=$(printf '\\037'); line={tool}\n"
                        f"for a in \"$@\"; do line=\"$line$sep$a\"; done\n"
                        f"printf '%s\\n' \"$line\" >> {self.log}\n"
                        f"exec /usr/bin/{tool} -F {self.dir}/ssh_config \"$@\"\n")
            os.chmod(path, 0o755)

    def start_sshd(self, x: str) -> None:
        p = subprocess.Popen(["ip", "netns", "exec", self.ns[x], SSHD, "-D", "-f", f"{self.dir}/sshd_{x}.conf",
                              "-E", f"{self.dir}/sshd_{x}.log"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.sshd[x] = p
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # listening once a connect succeeds
            r = sh("ip", "netns", "exec", self.ns[x], "bash", "-c", f"exec 3<>/dev/tcp/{self.ip[x]}/22", check=False)
            if r.returncode == 0:
                return
            if p.poll() is not None:
                raise RuntimeError(f"sshd in {self.ns[x]} exited: {open(f'{self.dir}/sshd_{x}.log').read()}")
            time.sleep(0.05)
        raise RuntimeError(f"sshd in {self.ns[x]} did not listen")

    def stop_sshd(self, x: str) -> None:
        p = self.sshd.pop(x, None)
        if p and p.poll() is None:
            p.terminate()
            p.wait(timeout=10)

    # -- use ---------------------------------------------------------------------------------
    def alias(self, x: str) -> str:
        return f"{self.tag}-node-{x}"

    def workdir(self, x: str) -> str:
        return f"{self.dir}/work-{x}"

    def topology(self, *, rounds: int = 3, sizes: List[int] = (1024, 4096), collectives: List[str] = (
            "barrier", "broadcast", "allgather", "ring_allreduce"), ring: List[int] = (0, 2, 1, 3), base_port: int = 9400,
                 extra_nodes: str = "", timeout: float = 30, name: str = "cluster.yaml") -> str:
        lines = ["controller: node-a", f"base_port: {base_port}", "nodes:"]
        for i, x in enumerate(NODES):
            lines += [f"  - node_id: node-{x}", f"    host: {self.ip[x]}", f"    ranks: [{i}]",
                      f"    ssh_alias: {self.alias(x)}", "    interface: eth0", f"    workdir: {self.workdir(x)}",
                      f"    wcomm: {WCOMM}"]
        lines.append(extra_nodes) if extra_nodes else None
        lines += [f"ring: {list(ring)}", "benchmark:", f"  payload_sizes: {list(sizes)}", f"  rounds: {rounds}",
                  "  warmup_rounds: 1", f"  collectives: [{', '.join(collectives)}]", f"  timeout: {timeout}", "comm: {}"]
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def env(self) -> dict:
        env = dict(os.environ)
        env["PATH"] = f"{self.dir}/bin:" + env.get("PATH", "/usr/bin:/bin")
        return env

    def wcomm(self, *args: str, node: str = "a", **kwargs) -> subprocess.Popen:
        """`wcomm ARGS` run inside node's namespace (the control machine is node-a)."""
        return subprocess.Popen(["ip", "netns", "exec", self.ns[node], WCOMM, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env(), cwd=self.dir, **kwargs)

    def logged_commands(self) -> List[List[str]]:
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [line.rstrip("\n").split(SEP) for line in f if line.strip()]

    def clear_log(self) -> None:
        if os.path.exists(self.log):
            os.remove(self.log)

    def leftover_processes(self) -> List[str]:
        """Worker processes and SSH sessions still running (there must be none after a launch)."""
        found = []
        r = sh("pgrep", "-af", f"{WCOMM} cluster (worker|rank)", check=False)
        found += [line for line in r.stdout.splitlines() if line.strip()]
        for x, p in self.sshd.items():
            r = sh("pgrep", "-a", "-P", str(p.pid), check=False)  # ip netns exec -> sshd
            for line in r.stdout.splitlines():
                child = line.split()[0]
                r2 = sh("pgrep", "-a", "-P", child, check=False)  # sshd's session processes
                found += [f"node-{x} session: {s}" for s in r2.stdout.splitlines() if s.strip()]
        return found

    def wait_no_leftovers(self, seconds: float = 10) -> List[str]:
        deadline = time.monotonic() + seconds
        while True:
            left = self.leftover_processes()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def close(self) -> None:
        for x in list(self.sshd):
            try:
                self.stop_sshd(x)
            except Exception:
                self.sshd[x].kill() if x in self.sshd else None
        r = sh("pgrep", "-f", f"{WCOMM} cluster (worker|rank)", check=False)
        for pid in r.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for ns in [*self.ns.values(), self.bridge_ns]:
            sh("ip", "netns", "del", ns, check=False)
        if self.made_run_sshd:
            shutil.rmtree("/run/sshd", ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def report_of(process: subprocess.Popen, timeout: float = 90):
    out, err = process.communicate(timeout=timeout)
    try:
        return json.loads(out), err
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON report (exit {process.returncode}):\nstdout: {out[-2000:]}\nstderr: {err[-4000:]}")
