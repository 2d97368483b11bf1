#!/usr/bin/python3
"""The entity mesh in Python: an api_server, a conductor and two workers, each its own
process, serving a few requests (the C++ twin is examples/mesh_inference.cpp).

    PYTHONPATH=build/python /usr/bin/python3 examples/mesh_inference.py [N_REQUESTS]

make_communicator picks the backend: MSTAR_RUST_ZMQ=0 pure pyzmq, 1 wcomm's C++ ZeroMQ
communicator, AUTO (default) the C++ one when it imports; WCOMM_EXAMPLE_TRANSPORT=wcomm runs
the mesh on wcomm's own transport. Any entity may use a different ZeroMQ backend than the
others: they share one wire. The conductor never blocks on a busy worker (OutboxCommunicator).
"""
import os
import subprocess
import sys
import tempfile

from wireless_comm.mesh import DEPLOYMENT_ANCHOR_ENTITY, CommProtocol, OutboxCommunicator, make_communicator

ENTITIES = ["api_server", DEPLOYMENT_ANCHOR_ENTITY, "worker_0", "worker_1"]


def connect(me, push_ids, prefix):
    if os.environ.get("WCOMM_EXAMPLE_TRANSPORT") == "wcomm":
        # wcomm's peer directory is fixed: everyone who may send to us.
        return make_communicator(me, push_ids, CommProtocol.SHM, prefix, transport="wcomm", peer_ids=ENTITIES)
    return make_communicator(me, push_ids, CommProtocol.IPC, prefix)


def api_server(prefix, n):
    c = connect("api_server", ["conductor"], prefix)
    for i in range(n):
        c.send("conductor", {"op": "request", "id": i, "prompt": f"hello {i}"})
    done = 0
    while done < n:
        for r in c.get_all_new_messages(blocking=True, timeout_s=30):
            print(f"api_server: request {r['id']} -> {r['text']!r} (by {r['worker']})", flush=True)
            done += 1
    c.send("conductor", {"op": "shutdown"})


def conductor(prefix):
    out = OutboxCommunicator(connect("conductor", ["worker_0", "worker_1"], prefix))
    n = 0
    while True:
        for m in out.get_all_new_messages(blocking=True, timeout_s=1.0):
            if m.get("op") == "shutdown":
                out.send_each(["worker_0", "worker_1"], {"op": "shutdown"})
                byes = 0  # closing drops what is unsent (LINGER 0): wait for the workers' word
                for _ in range(50):
                    byes += sum(r.get("op") == "bye" for r in out.get_all_new_messages(blocking=True, timeout_s=0.1))
                    if byes == 2:
                        break
                return
            out.send(f"worker_{n % 2}", m)  # round robin
            n += 1


def worker(prefix, me):
    c = connect(me, ["api_server", "conductor"], prefix)
    while True:
        for m in c.get_all_new_messages(blocking=True, timeout_s=1.0):
            if m.get("op") == "shutdown":
                c.send("conductor", {"op": "bye"})
                return
            c.send("api_server", {"id": m["id"], "text": m["prompt"].upper(), "worker": me})  # the "model"


def main():
    if len(sys.argv) > 3:  # one entity: mesh_inference.py N PREFIX ENTITY
        n, prefix, me = int(sys.argv[1]), sys.argv[2], sys.argv[3]
        if me == "api_server":
            api_server(prefix, n)
        elif me == "conductor":
            conductor(prefix)
        else:
            worker(prefix, me)
        return 0
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    prefix = tempfile.mkdtemp(prefix="mesh-example-") + "/"
    children = [subprocess.Popen([sys.executable, __file__, str(n), prefix, e]) for e in ENTITIES]
    codes = [p.wait(timeout=120) for p in children]
    subprocess.run(["rm", "-rf", prefix])
    print("all entities done" if not any(codes) else f"exit codes {codes}")
    return 1 if any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())
