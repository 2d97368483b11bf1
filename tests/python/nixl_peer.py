"""Child processes for test_nixl_procs.py, written against `nixl._api` only: run them with
`python3 -m wireless_comm.nixl.alias nixl_peer.py ROLE ...` so `import nixl` finds wcomm's surface.

    target BACKEND PORT        registers 1 MiB, answers "written" notifications with the sha256
                               of what landed, exits on "bye"
    producer BACKEND PORT      the connector's producer; reads "publish KEY N" lines on stdin
"""

import hashlib
import sys
import time

import numpy as np

import nixl
from nixl._api import nixl_agent, nixl_agent_config

assert getattr(nixl, "__wcomm_alias__", False), "expected wcomm's alias, not a real NIXL"
PATTERN = (np.arange(1 << 20) * 7 % 253).astype(np.uint8)


def target(backend: str, port: int) -> None:
    agent = nixl_agent("target", nixl_agent_config(enable_listen_thread=True, listen_port=port, backends=[backend]))
    mem = PATTERN.copy()
    agent.register_memory(mem)
    print("ready", mem.__array_interface__["data"][0], flush=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for sender, msgs in agent.get_new_notifs().items():
            for msg in msgs:
                if msg == b"bye":
                    return
                if msg.startswith(b"written"):
                    n = int(msg.split()[1])
                    agent.send_notif(sender, b"sha " + hashlib.sha256(mem[:n].tobytes()).hexdigest().encode())
        time.sleep(0.001)
    sys.exit("target: no bye within 30 s")


def producer(backend: str, port: int) -> None:
    from nixl_connector import Producer
    p = Producer("producer", port, backend, 4096)
    print("ready", flush=True)
    import select
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        p.poll()
        if select.select([sys.stdin], [], [], 0.001)[0]:
            cmd = sys.stdin.readline().split()
            if not cmd or cmd[0] == "exit":
                return
            if cmd[0] == "publish":
                p.publish(cmd[1], bytes(range(256)) * int(cmd[2]))
                print("published", flush=True)
            elif cmd[0] == "parked":
                print(len(p.parked), flush=True)
    sys.exit("producer: no exit within 30 s")


if __name__ == "__main__":
    {"target": target, "producer": producer}[sys.argv[1]](sys.argv[2], int(sys.argv[3]))
