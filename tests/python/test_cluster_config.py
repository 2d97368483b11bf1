"""The cluster topology file without any host: V0.1's dry-run output byte for byte, bad input
stopped before any host is touched (the message names the node and the key), the sweep's
cells and their order (Python's random.Random(seed).shuffle), and the Python entry points."""

import json
import os
import random
import subprocess
import sys

import pytest

from cluster_net import WCOMM
from helpers import child_env

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "cluster")
REFERENCE = os.path.join(DATA, "v0.1-cluster-dry-run.txt")
EXAMPLE = "configs/cluster-four-node.example.yaml"

pytestmark = pytest.mark.skipif(not os.access(WCOMM, os.X_OK), reason=f"{WCOMM} is not built")

GOOD_NODES = {
    "node-a": "host: 127.0.0.1\n    ranks: [0]\n    ssh_alias: localhost\n    interface: lo",
    "node-b": "host: 127.0.0.1\n    ranks: [1]\n    ssh_alias: localhost\n    interface: lo",
    "node-c": "host: 127.0.0.1\n    ranks: [2]\n    ssh_alias: localhost\n    interface: lo",
    "node-d": "host: 127.0.0.1\n    ranks: [3]\n    ssh_alias: localhost\n    interface: lo",
}


def topology(nodes=None, head="controller: node-a\nbase_port: 9400\n", tail="ring: [0, 1, 2, 3]\nbenchmark:\n  rounds: 2\n"):
    nodes = dict(GOOD_NODES, **(nodes or {}))
    body = "".join(f"  - node_id: {n}\n    {fields}\n" for n, fields in nodes.items())
    return head + "nodes:\n" + body + tail


@pytest.fixture
def sandbox(tmp_path):
    """ssh / scp wrappers first in PATH that log each call; scp refuses (nothing may be copied)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "ssh").write_text(f"#!/bin/sh\necho \"ssh $*\" >> {log}\nexec /usr/bin/ssh -F /dev/null \"$@\"\n")
    (bin_dir / "scp").write_text(f"#!/bin/sh\necho \"scp $*\" >> {log}\nexit 1\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")

    def launch(text):
        path = tmp_path / "topology.yaml"
        path.write_text(text)
        r = subprocess.run([WCOMM, "cluster", "launch", "--config", str(path), "--timeout", "30"], capture_output=True,
                           text=True, env=env, timeout=60)
        calls = log.read_text().splitlines() if log.exists() else []
        return r, calls
    return launch


def test_dry_run_prints_v01s_commands_byte_for_byte():
    r = subprocess.run([WCOMM, "cluster", "launch", "--config", "./" + EXAMPLE, "--dry-run", "--output", "ignored.json"],
                       capture_output=True, text=True, cwd=DATA, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.replace("/tmp/wireless-comm", "<workdir>") == open(REFERENCE).read()
    assert not os.path.exists(os.path.join(DATA, "ignored.json"))


def test_dry_run_quotes_a_workdir_with_a_space_and_names_the_wcomm_binary(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(topology({"node-b": GOOD_NODES["node-b"] + "\n    workdir: /srv/my runs\n    wcomm: /opt/wcomm/bin/wcomm"}))
    r = subprocess.run([WCOMM, "cluster", "launch", "--config", str(path), "--dry-run"], capture_output=True, text=True,
                       timeout=30)
    plan = json.loads(r.stdout)
    assert plan["workers"]["node-b"] == ("cd '/srv/my runs' && /opt/wcomm/bin/wcomm cluster worker "
                                         "--config .wireless_comm_cluster.yaml --node-id node-b")
    assert plan["copies"][1] == ["scp", str(path), "localhost:/srv/my runs/.wireless_comm_cluster.yaml"]
    assert plan["workers"]["node-a"].startswith("cd . && PYTHONPATH=src python3 -m wireless_comm.cluster_benchmark worker")


@pytest.mark.parametrize("text, names", [
    (topology({"node-c": "host: 127.0.0.1\n    ranks: [1]\n    ssh_alias: localhost\n    interface: lo"}),
     ["node-c.ranks", "rank 1 is also owned by node-b", "ranks must be unique and contiguous from zero"]),
    (topology(head="base_port: 9400\n"), ["controller:", "controller must be a non-empty string"]),
    (topology(head="controller: node-x\nbase_port: 9400\n"), ["controller:", "'node-x' is not a configured node_id"]),
    (topology({"node-b": "host: 127.0.0.1\n    ranks: [1]\n    sshalias: localhost\n    interface: lo"}),
     ["nodes[1] (node-b)", "unknown fields in nodes[1]: sshalias"]),
    (topology(tail="ring: [0, 1, 2, 3]\nbenchmark:\n  rounds: 2\n  warmup: 1\n"), ["benchmark", "unknown fields in benchmark: warmup"]),
    (topology({"node-b": "host: 127.0.0.1\n    ranks: [5]\n    ssh_alias: localhost\n    interface: lo"}),
     ["node-b.ranks", "rank 5 leaves a gap"]),
    (topology(tail="ring: [0, 1, 2, 2]\nbenchmark: {}\n"), ["ring:", "ring must contain every rank exactly once"]),
    (topology(head="controller: node-b\nbase_port: 9400\n"), ["controller:", "node-a does (controller node must own rank 0)"]),
    (topology({"node-d": "host: ''\n    ranks: [3]\n    ssh_alias: localhost\n    interface: lo"}), ["node-d.host must be non-empty"]),
    (topology(head="controller: node-a\nbase_port: 65534\n"), ["base_port:", "rank port range is invalid"]),
    (topology({"node-b": "host: 127.0.0.1\n    ranks: [1]\n    interface: lo"}), ["nodes[1] (node-b)", "missing required fields: ssh_alias"]),
    (topology(tail="ring: [0, 1, 2, 3]\nbenchmark:\n  collectives: [allreduce]\n"), ["benchmark", "unknown collective: allreduce"]),
    (topology(tail="ring: [0, 1, 2, 3]\nbenchmark: {}\ncomm:\n  egress_rate_bytes_per_second: 100\n"), ["comm", "egress"]),
    (topology(tail="ring: [0, 1, 2, 3]\nbenchmark:\n  broadcast_root: 4\n"),
     ["benchmark: broadcast root must be smaller than world size (world size 4)"]),
    (topology(tail="ring: [0, 1, 2, 3]\nbenchmark:\n  payload_sizes: [1022]\n"),
     ["benchmark: ring-allreduce payload sizes must be multiples of 4 bytes"]),
])
def test_bad_topology_stops_before_any_host_and_names_node_and_key(sandbox, text, names):
    r, calls = sandbox(text)
    assert r.returncode == 2, r.stderr
    for name in names:
        assert name in r.stderr, r.stderr
    assert calls == []  # nothing was contacted, not even ssh -G


def test_unreachable_alias_stops_before_any_host(sandbox):
    r, calls = sandbox(topology({"node-c": "host: 127.0.0.1\n    ranks: [2]\n    ssh_alias: wcl-no-such-host.invalid\n"
                                           "    interface: lo"}))
    assert r.returncode == 2, r.stderr
    assert "node-c.ssh_alias: 'wcl-no-such-host.invalid' is unreachable" in r.stderr
    assert calls and all(c.startswith("ssh -G ") for c in calls), calls  # resolved only, nothing copied or started


def python_order(names, seed):
    items = list(names)
    random.Random(seed).shuffle(items)
    return items


def sweep_cells(base, *args):
    r = subprocess.run([WCOMM, "cluster", "sweep", "--config", str(base), "--output-dir", "unused", "--dry-run", *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["cells"]


DEFAULT_ORDER_20260827 = ("allreduce-block64k, ring-0-2-1-3, ring-0-3-1-2, scheduler-c2, scheduler-c1, allreduce-block256k, "
                          "broadcast-root3, broadcast-root1, broadcast-root2, ring-0-3-2-1, scheduler-c4, ring-0-2-3-1, "
                          "ring-0-1-2-3, allreduce-block128k, broadcast-root0, ring-0-1-3-2").split(", ")


def test_sweep_cells_and_order_are_v01s(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(topology())
    cells = sweep_cells(base)
    assert [c["name"] for c in cells] == DEFAULT_ORDER_20260827  # V0.1's order for its default seed
    generated = ["scheduler-c4", "scheduler-c2", "scheduler-c1"] + \
        [f"ring-0-{a}-{b}-{c}" for a, b, c in __import__("itertools").permutations([1, 2, 3])] + \
        [f"broadcast-root{k}" for k in range(4)] + ["allreduce-block64k", "allreduce-block128k", "allreduce-block256k"]
    for seed in (0, 1, 7, 123456789, 2**40 + 5):
        assert [c["name"] for c in sweep_cells(base, "--seed", str(seed))] == python_order(generated, seed)
    p2p = [c["name"] for c in sweep_cells(base, "--suites", "p2p", "--seed", "20260827")]
    assert p2p[:3] == ["p2p-byte-rr64k-rate20", "p2p-byte-rr16k-rate30", "p2p-byte-rr16k"]
    # Cell i's config: base port first-port + 8 i, its ring, comm and one collective and size.
    import yaml
    first = yaml.safe_load(cells[0]["config"])
    assert first["base_port"] == 9800 and first["benchmark"]["allreduce_block_bytes"] == 65536
    assert first["benchmark"]["collectives"] == ["ring_allreduce"] and first["benchmark"]["payload_sizes"] == [1048576]
    assert yaml.safe_load(cells[1]["config"])["ring"] == [0, 2, 1, 3] and yaml.safe_load(cells[1]["config"])["base_port"] == 9808
    rate = yaml.safe_load(sweep_cells(base, "--suites", "p2p")[0]["config"])
    assert rate["comm"] == {"egress_quantum_bytes": 65536, "egress_rate_bytes_per_second": 2500000}


def test_sweep_bad_input(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(topology())
    r = subprocess.run([WCOMM, "cluster", "sweep", "--config", str(base), "--output-dir", str(tmp_path / "o"), "--suites",
                        "ring,p2p-fast,zzz"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown experiment suites: p2p-fast, zzz" in r.stderr
    base.write_text("- a list\n")
    r = subprocess.run([WCOMM, "cluster", "sweep", "--config", str(base), "--output-dir", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "base cluster configuration must be a mapping" in r.stderr


def python_module(*args, cwd=None):
    env = dict(child_env(), WCOMM_CLI=WCOMM)
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


def test_python_entry_points_run_wcomm_cluster(tmp_path):
    r = python_module("wireless_comm.cluster_benchmark", "launch", "--config", EXAMPLE, "--dry-run", cwd=DATA)
    assert r.returncode == 0, r.stderr
    assert r.stdout.replace("/tmp/wireless-comm", "<workdir>") == open(REFERENCE).read()
    base = tmp_path / "base.yaml"
    base.write_text(topology())
    r = python_module("wireless_comm.experiment_sweep", "--config", str(base), "--output-dir", "x", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert [c["name"] for c in json.loads(r.stdout)["cells"]] == DEFAULT_ORDER_20260827
    r = python_module("wireless_comm.cluster_benchmark", "frobnicate")
    assert r.returncode == 2 and "launch,worker" in r.stderr
