#!/usr/bin/python3
"""A pyzmq mesh entity written from docs/mesh.md's wire description alone (no wcomm code):
PULL bound at its endpoint, PUSH per peer, LINGER 0, send_pyobj / recv_pyobj. The mesh
interop tests run it against wcomm's communicators.

    pyzmq_entity.py PROTOCOL PREFIX MY_ID PEER_ID MODE N
    echo_then_send N: recv_pyobj N messages, send each back as {"echo": msg, "by": MY_ID};
                      then send sample(i) for i < N; then wait for {"ok": N} and exit 0.
"""
import os
import sys

import zmq


def endpoint(entity_id, protocol, prefix):
    if protocol == "IPC":
        return f"ipc://{prefix}/{entity_id}.ipc"
    host = os.environ.get("MSTAR_ZMQ_TCP_HOST", "127.0.0.1")
    base = int(os.environ.get("MSTAR_ZMQ_TCP_BASE_PORT", "19000"))
    if entity_id == "api_server":
        port = base
    elif entity_id == "conductor":
        port = base + 1
    elif entity_id == "api_server_preprocess_worker":
        port = base + 2
    elif entity_id.startswith("worker_") and entity_id[7:].isdigit():
        port = base + 100 + int(entity_id[7:])
    else:
        port = base + 1000 + sum(entity_id.encode()) % 1000
    return f"tcp://{host}:{port}"


def sample(i):
    """A message with every value type the mesh carries."""
    return {"seq": i, "text": "h\u00e9llo", "blob": bytes([i % 256]) * 3, "pi": 3.25, "big": 2**40 + i,
            "neg": -7 - i, "tuple": (1, "a", None), "list": [True, False, None, 1.5], "u64": 2**63 + i,
            "nested": {"k": [1, {"x": b""}]}}


def main():
    protocol, prefix, me, peer, mode, n = sys.argv[1:7]
    n = int(n)
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    if protocol == "IPC":
        os.makedirs(prefix, exist_ok=True)
    pull.bind(endpoint(me, protocol, prefix))
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.setsockopt(zmq.SNDHWM, int(os.environ.get("MSTAR_ZMQ_SNDHWM", "100000")))
    push.connect(endpoint(peer, protocol, prefix))
    print("ready", flush=True)
    assert mode == "echo_then_send", mode
    pull.RCVTIMEO = 30000  # a test that went wrong ends here instead of hanging
    for _ in range(n):
        push.send_pyobj({"echo": pull.recv_pyobj(), "by": me})
    for i in range(n):
        push.send_pyobj(sample(i))
    while True:
        msg = pull.recv_pyobj()
        if isinstance(msg, dict) and msg.get("ok") == n:
            print(f"ok {n}", flush=True)
            return 0


if __name__ == "__main__":
    sys.exit(main())
