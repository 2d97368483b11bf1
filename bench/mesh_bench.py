#!/usr/bin/python3
"""The entity mesh's speed, every backend beside pure pyzmq in the same run (docs/performance.md).

    PYTHONPATH=build/python /usr/bin/python3 bench/mesh_bench.py [--n 200000] [--rounds 5000] [--repeat 3]

Two entities in two processes, small messages ({"seq": i}, pickled). rate: one way, messages
per second from the first send to the receiver's count of the last. rtt: ping-pong through
send + get_all_new_messages(blocking=True), p50 / p99. Rows: Python API on pyzmq (the
reference), on the C++ ZeroMQ communicator, on the wcomm transport; and bench/mesh_bench (the
C++ API) for both C++ backends when it is built. Each figure is the median of --repeat runs.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def make(backend, me, peer, prefix):
    from wireless_comm.mesh import CommProtocol, NativeZMQCommunicator, WcommCommunicator, ZMQCommunicator
    if backend == "pyzmq":
        return ZMQCommunicator(me, [peer], CommProtocol.IPC, prefix)
    if backend == "native":
        return NativeZMQCommunicator(me, [peer], CommProtocol.IPC, prefix)
    return WcommCommunicator(me, [peer], CommProtocol.IPC, prefix)  # a unix socket


def first(c):
    while True:
        got = c.get_all_new_messages(blocking=True, timeout_s=30)
        if got:
            return got[0]


def peer(mode, backend, prefix, n):
    c = make(backend, "worker_1", "worker_0", prefix)
    c.send("worker_0", "ready")
    if mode == "rate":
        got = 0
        while got < n:
            got += len(c.get_all_new_messages(blocking=True, timeout_s=30))
        c.send("worker_0", got)
    else:
        for _ in range(n):
            for m in c.get_all_new_messages(blocking=True, timeout_s=30):
                c.send("worker_0", m)
    first(c)  # goodbye: closing first could drop the last reply
    c.close()


def drive(mode, backend, n):
    prefix = tempfile.mkdtemp(prefix="mesh-bench-") + "/"
    child = subprocess.Popen([sys.executable, __file__, "--peer", mode, backend, prefix, str(n)])
    c = make(backend, "worker_0", "worker_1", prefix)
    first(c)
    if mode == "rate":
        start = time.perf_counter()
        send = c.send
        for i in range(n):
            send("worker_1", {"seq": i})
        got = first(c)
        result = got / (time.perf_counter() - start)
    else:
        lat = []
        msg = {"seq": 1}
        for _ in range(n):
            t = time.perf_counter()
            c.send("worker_1", msg)
            while not c.get_all_new_messages(blocking=True, timeout_s=30):
                pass
            lat.append((time.perf_counter() - t) * 1e6)
        lat.sort()
        result = (lat[len(lat) // 2], lat[int(len(lat) * 0.99)])
    c.send("worker_1", "bye")
    child.wait(timeout=60)
    c.close()
    subprocess.run(["rm", "-rf", prefix])
    return result


def cpp(mode, backend, protocol, n):
    exe = os.environ.get("MESH_BENCH") or os.path.join(HERE, "..", "build", "bench", "mesh_bench")
    if not os.access(exe, os.X_OK):
        return None
    out = subprocess.run([exe, mode, backend, protocol, str(n)], capture_output=True, text=True, timeout=300).stdout
    fields = dict(f.split("=") for f in out.split() if "=" in f)
    return float(fields["msgs_per_s"]) if mode == "rate" else (float(fields["p50_us"]), float(fields["p99_us"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peer", nargs=4)
    a = ap.parse_args()
    if a.peer:
        return peer(a.peer[0], a.peer[1], a.peer[2], int(a.peer[3]))
    rows = [("Python API, pure pyzmq (reference)", lambda m, n: drive(m, "pyzmq", n)),
            ("Python API, C++ ZeroMQ communicator", lambda m, n: drive(m, "native", n)),
            ("Python API, wcomm transport (unix socket)", lambda m, n: drive(m, "wcomm", n)),
            ("C++ API, C++ ZeroMQ communicator (IPC)", lambda m, n: cpp(m, "zmq", "IPC", n)),
            ("C++ API, wcomm transport IPC (unix socket)", lambda m, n: cpp(m, "wcomm", "IPC", n)),
            ("C++ API, wcomm transport SHM (shared-memory rings)", lambda m, n: cpp(m, "wcomm", "SHM", n))]
    results = {}
    # Turns alternate between rows, so a slow moment of the machine hits them all alike.
    for _ in range(a.repeat):
        for name, fn in rows:
            r = fn("rate", a.n)
            t = fn("rtt", a.rounds)
            if r is not None:
                results.setdefault(name, []).append((r, t))
    ref_rate = statistics.median(r for r, _ in results[rows[0][0]])
    ref_p50 = statistics.median(t[0] for _, t in results[rows[0][0]])
    print(f"| what | msgs/s (n={a.n}) | x pyzmq | RTT p50 us | RTT p99 us | x pyzmq p50 |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        p50 = statistics.median(t[0] for _, t in runs)
        p99 = statistics.median(t[1] for _, t in runs)
        print(f"| {name} | {rate:,.0f} | {rate / ref_rate:.2f}x | {p50:.1f} | {p99:.1f} | {p50 / ref_p50:.2f}x |")
        print("  runs:", ", ".join(f"{r:,.0f}/s {t[0]:.1f}us" for r, t in runs), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
