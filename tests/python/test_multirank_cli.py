"""python -m wireless_comm.multirank: the local mode and V0.1's two-host mode on loopback, with
V0.1's report keys."""

import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "..", "data", "reference-reports", "v0.1-multirank-loopback.json")


def free_base(count):
    for base in range(31000 + os.getpid() % 5000 * 4, 65000, 7):
        try:
            socks = []
            for p in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def multirank(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "wireless_comm.multirank", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_local_ranks_report_on_stdout():
    p = multirank("--local-ranks", "4", "--base-port", str(free_base(4)), "initiator", "--payload-sizes", "4096",
                  "--rounds", "3", "--reduce", "sum", "--dtype", "float32")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    report = json.loads(out)
    assert report["world_size"] == 4 and report["settings"]["reduce"] == "sum"
    assert "ring_allreduce 4096 B" in err  # progress on stderr
    assert set(report["collective_summary"]) == {"barrier", "broadcast", "allgather", "ring_allreduce"}


def test_two_host_mode_on_loopback_has_v01_keys(tmp_path):
    base = str(free_base(4))
    common = ["--local-host", "127.0.0.1", "--remote-host", "127.0.0.1", "--base-port", base, "--bind-host", "127.0.0.1"]
    responder = multirank(*common, "--quiet", "responder")
    out = tmp_path / "init.json"
    initiator = multirank(*common, "--output", str(out), "initiator", "--payload-sizes", "1024,65536", "--rounds", "5",
                          "--collectives", "barrier,broadcast,allgather,ring_allreduce")
    _, err = initiator.communicate(timeout=60)
    responder.communicate(timeout=30)
    assert initiator.returncode == 0, err
    assert responder.returncode == 0
    report = json.loads(out.read_text())
    with open(REFERENCE) as f:
        ref = json.load(f)
    assert set(report) == set(ref)
    assert set(report["settings"]) == set(ref["settings"]) | {"reduce", "dtype", "algorithm"}
    assert set(report["collective_summary"]) == set(ref["collective_summary"])
    for c, sizes in ref["collective_summary"].items():
        assert set(report["collective_summary"][c]) == set(sizes)
        for s, entry in sizes.items():
            assert set(report["collective_summary"][c][s]) == set(entry)


def test_bad_input_exits_with_a_message():
    p = multirank("--local-ranks", "3", "initiator", "--payload-sizes", "100")
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1 and "multiples of 3 bytes" in err
