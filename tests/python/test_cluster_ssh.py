"""`wcomm cluster launch` over SSH across four hosts (network namespaces on one bridge, each with
a real sshd; cluster_net.py): a full run of the four collectives, the dry-run checked against
the commands actually run, a host whose sshd is down, a worker killed mid-run, Ctrl-C, a
timeout (every worker stopped, nothing left running), and a sweep interrupted and resumed."""

import json
import os
import re
import shlex
import signal
import subprocess
import time

import pytest

import cluster_net
from cluster_net import NODES, WCOMM, report_of

pytestmark = pytest.mark.skipif(cluster_net.unavailable_reason() is not None,
                                reason=str(cluster_net.unavailable_reason()))


@pytest.fixture(scope="module")
def net():
    cluster = cluster_net.SshCluster()
    yield cluster
    cluster.close()


@pytest.fixture(autouse=True)
def clean(net):
    net.clear_log()
    yield
    for x in NODES:  # a test that stopped an sshd gives it back
        if x not in net.sshd:
            net.start_sshd(x)
    assert net.wait_no_leftovers() == [], "processes left running after the test"


def wait_for_line(process, pattern, seconds=60):
    """Reads the process's stderr until a line matches; returns the match and the lines read."""
    lines, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(pattern, line)
        if m:
            return m, lines
    raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(lines)}")


def test_launch_runs_every_collective_on_four_hosts_and_runs_what_dry_run_prints(net, tmp_path):
    topo = net.topology(rounds=3, sizes=[1024, 4096], ring=[0, 2, 1, 3])
    output = tmp_path / "report.json"
    p = net.wcomm("cluster", "launch", "--config", topo, "--output", str(output), "--timeout", "60")
    _, err = p.communicate(timeout=90)
    assert p.returncode == 0, err
    assert f"wrote cluster report to {output}" in err
    report = json.loads(output.read_text())

    assert report["mode"] == "physical_multi_node_wifi" and report["world_size"] == 4
    assert report["physical_node_count"] == 4 and report["ring"] == [0, 2, 1, 3]
    assert sorted(report["nodes"]) == [f"node-{x}" for x in NODES]
    for i, x in enumerate(NODES):
        side = report["nodes"][f"node-{x}"]
        assert side["local_ranks"] == [i]
        env = side["environment_before"]
        assert env["interface"]["name"] == "eth0" and net.ip[x] in json.dumps(env["interface"])  # its own link
        assert side["environment_after"]["kernel_network_counters"] is not None
        assert side["interface_counter_delta"]["tx_bytes"] > 0 and side["link_samples"]
    assert [r["rank"] for r in report["rank_results"]] == [0, 1, 2, 3]
    for r in report["rank_results"]:
        assert set(r["samples_ms"]) == {"barrier", "broadcast", "allgather", "ring_allreduce"}
        assert len(r["samples_ms"]["allgather"]["4096"]) == 3
    summary = report["collective_summary"]["ring_allreduce"]["4096"]
    assert summary["collective_completion_ms"]["sample_count"] == 3 and "p99" in summary["collective_completion_ms"]
    assert sorted(summary["per_rank_ms"]) == ["0", "1", "2", "3"]
    assert all(s["state"] == "finished" for s in report["launch"]["nodes_status"].values())

    # Progress: each node prepared, started, listening, the controller last, measurements, finished.
    for x in "bcd":
        assert re.search(rf"node-{x}: preparing .*\n(.*\n)*cluster: node-{x}: starting .*\n(.*\n)*cluster: node-{x}: listening", err)
    assert re.search(r"node-a: starting \(controller, ranks \[0\]\)", err)
    assert re.search(r"rank 0 ring_allreduce 4096 B: p50 \S+ ms \(7/7 done, about 0 s left\)", err)
    assert "all 4 nodes finished" in err

    # The commands actually run (logged by the ssh / scp in PATH) are the dry-run's.
    ran = [c for c in net.logged_commands() if c[:2] != ["ssh", "-G"]]
    d = net.wcomm("cluster", "launch", "--config", topo, "--dry-run")
    plan, derr = d.communicate(timeout=30)
    assert d.returncode == 0, derr
    plan = json.loads(plan)
    assert sorted(c for c in ran if c[0] == "scp") == sorted(plan["copies"])
    sessions = [c for c in ran if c[0] == "ssh"]
    expected = {f"node-{x}": ["ssh", net.alias(x), "bash", "-lc", shlex.quote(plan["workers"][f"node-{x}"])] for x in NODES}
    assert sorted(sessions) == sorted(expected.values())
    assert sessions[-1] == expected["node-a"]  # the controller starts last
    assert plan["workers"]["node-b"] == (f"cd {net.workdir('b')} && {WCOMM} cluster worker "
                                         f"--config .wireless_comm_cluster.yaml --node-id node-b")
    assert net.logged_commands()[:0] == []  # the dry-run itself ran nothing
    assert len(net.logged_commands()) == len(ran) + 4

    # The report draws as a page.
    page = tmp_path / "report.html"
    r = subprocess.run([WCOMM, "report", str(output), "-o", str(page)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "ring_allreduce" in page.read_text()


def test_host_with_sshd_down_is_named_and_nothing_runs(net):
    net.stop_sshd("c")
    p = net.wcomm("cluster", "launch", "--config", net.topology(), "--timeout", "60")
    report, err = report_of(p)
    assert p.returncode == 1, err
    assert report["status"] == "failed"
    assert report["failure"]["node"] == "node-c"
    assert "Connection refused" in report["failure"]["reason"] and "copying the topology failed" in report["failure"]["reason"]
    assert "node node-c failed" in err
    assert report["nodes_status"]["node-b"]["state"] == "not started"
    assert not [c for c in net.logged_commands() if c[0] == "ssh" and c[1] != "-G"]  # no worker was started


def test_worker_killed_mid_run_is_named_and_every_other_worker_stopped(net):
    # 2000 barriers end well inside the launch's 90 s even on a loaded machine, and the broadcasts
    # after them are still running at the kill (as test_cluster_batch.py's MID_RUN_ROUNDS).
    topo = net.topology(rounds=2000, sizes=[1024], collectives=["barrier", "broadcast"], timeout=60)
    p = net.wcomm("cluster", "launch", "--config", topo, "--timeout", "90")
    m, lines = wait_for_line(p, r"node-c: listening \(ranks \[2\], pid (\d+)\)")
    victim = int(m.group(1))
    wait_for_line(p, r"rank 0 barrier 0 B")  # mid-run: the first measurement is done
    os.kill(victim, signal.SIGKILL)
    report, err = report_of(p)
    assert p.returncode == 1, err
    assert report["failure"]["node"] == "node-c", report["failure"]
    reason = report["failure"]["reason"]
    assert f"(pid {victim}) was killed by a signal" in reason or "killed by signal 9" in reason, reason
    states = {n: s["state"] for n, s in report["nodes_status"].items()}
    assert states["node-c"] == "failed"
    assert all(states[f"node-{x}"] != "finished" for x in "abd"), states


def test_worker_error_is_carried_into_the_report_and_the_others_stopped(net, tmp_path):
    text = open(net.topology()).read()
    topo = tmp_path / "bad-interface.yaml"
    topo.write_text(text.replace(f"    host: {net.ip['c']}\n    ranks: [2]\n    ssh_alias: {net.alias('c')}\n    interface: eth0",
                                 f"    host: {net.ip['c']}\n    ranks: [2]\n    ssh_alias: {net.alias('c')}\n    interface: wcl-nope"))
    assert "wcl-nope" in topo.read_text()
    p = net.wcomm("cluster", "launch", "--config", str(topo), "--timeout", "60")
    report, err = report_of(p)
    assert p.returncode == 1, err
    assert report["failure"]["node"] == "node-c"
    assert "network interface 'wcl-nope' does not exist" in report["failure"]["reason"]
    assert report["nodes_status"]["node-a"]["state"] == "not started"  # the controller never started
    assert all(report["nodes_status"][n]["state"].startswith("stopped") for n in ("node-b", "node-d")), report["nodes_status"]


def test_ctrl_c_stops_every_worker_and_says_so(net):
    topo = net.topology(rounds=20000, sizes=[1024], collectives=["barrier"], timeout=60)
    p = net.wcomm("cluster", "launch", "--config", topo, "--timeout", "90")
    wait_for_line(p, r"node-a: listening")
    p.send_signal(signal.SIGINT)
    report, err = report_of(p)
    assert p.returncode == 130, err
    assert report["status"] == "interrupted" and "SIGINT" in report["failure"]["reason"]
    assert all(s["state"].startswith("stopped") for s in report["nodes_status"].values()), report["nodes_status"]


def test_timeout_stops_every_worker(net):
    topo = net.topology(rounds=200000, sizes=[1024], collectives=["barrier"], timeout=60)
    p = net.wcomm("cluster", "launch", "--config", topo, "--timeout", "4")
    report, err = report_of(p)
    assert p.returncode == 1, err
    assert "cluster benchmark exceeded 4s" in report["failure"]["reason"]
    assert report["failure"]["node"] in {f"node-{x}" for x in NODES}


def test_sweep_interrupted_after_two_cells_resumes_the_rest_only(net, tmp_path):
    base = net.topology(name="base.yaml")
    out = tmp_path / "sweep"
    args = ["cluster", "sweep", "--config", base, "--output-dir", str(out), "--suites", "broadcast", "--rounds", "2",
            "--warmup-rounds", "1", "--payload-bytes", "4096", "--first-port", "9500", "--seed", "7"]
    p = net.wcomm(*args)
    m, lines = wait_for_line(p, r"sweep: seed 7, 4 cells in this order: (.*)")
    order = m.group(1).strip().split(", ")
    assert sorted(order) == [f"broadcast-root{k}" for k in range(4)]
    wait_for_line(p, r"cell 1/4 \S+: done")
    wait_for_line(p, r"cell 2/4 \S+: done")
    p.send_signal(signal.SIGINT)
    out_text, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "run the same command again" in err
    finished = sorted(f[:-5] for f in os.listdir(out / "reports") if f.endswith(".json") and ".failed" not in f)
    assert order[:2] == [n for n in order if n in finished][:2] and 2 <= len(finished) < 4
    before = {n: (out / "reports" / f"{n}.json").read_bytes() for n in finished}
    assert net.wait_no_leftovers() == []

    again = net.wcomm(*args)
    out_text, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert err.count("finished in an earlier run, skipped") == len(finished)
    assert err.count(": launching") == 4 - len(finished)
    for n in finished:
        assert f"{n}: finished in an earlier run" in err
        assert (out / "reports" / f"{n}.json").read_bytes() == before[n]  # not run again
    summary = json.loads((out / "summary.json").read_text())
    assert [c["name"] for c in summary["completed"]] == order and summary["remaining"] == []
    assert [c["resumed"] for c in summary["completed"]] == [n in finished for n in order]
    assert summary["seed"] == 7 and all(c["completion_ms"]["sample_count"] == 2 for c in summary["completed"])
    roots = {c["name"]: c["settings"]["broadcast_root"] for c in summary["completed"]}
    assert roots == {f"broadcast-root{k}": k for k in range(4)}
    assert "broadcast-root3" in (out / "summary.html").read_text()
    page = tmp_path / "page.html"
    r = subprocess.run([WCOMM, "report", str(out / "summary.json"), "-o", str(page)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "plot-sweep-completion" in page.read_text()


def test_v01_worker_command_runs_the_python_module_on_a_node(net, tmp_path):
    """A node without `wcomm:` gets V0.1's remote command (PYTHONPATH=src python -m
    wireless_comm.cluster_benchmark worker ...): the package there runs the wcomm it ships."""
    import wireless_comm
    src = os.path.join(net.workdir("d"), "src")
    os.makedirs(src, exist_ok=True)
    link = os.path.join(src, "wireless_comm")
    if not os.path.exists(link):
        os.symlink(os.path.dirname(wireless_comm.__file__), link)
    if not os.access(os.path.join(link, "_bin", "wcomm"), os.X_OK):
        pytest.skip("the wireless_comm package here ships no wcomm executable (_bin/wcomm)")
    text = open(net.topology()).read().replace(f"    workdir: {net.workdir('d')}\n    wcomm: {WCOMM}\n",
                                               f"    workdir: {net.workdir('d')}\n    python: /usr/bin/python3\n")
    topo = tmp_path / "python-node.yaml"
    topo.write_text(text)
    p = net.wcomm("cluster", "launch", "--config", str(topo), "--timeout", "60")
    report, err = report_of(p)
    assert p.returncode == 0, err
    assert [r["rank"] for r in report["rank_results"]] == [0, 1, 2, 3]
    sessions = [c for c in net.logged_commands() if c[0] == "ssh" and c[1] == net.alias("d")]
    assert sessions and "PYTHONPATH=src /usr/bin/python3 -m wireless_comm.cluster_benchmark worker" in sessions[0][-1]
    assert "running: all 4 nodes" in err
