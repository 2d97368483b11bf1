"""One mesh entity in its own process, for the wireless_comm.mesh tests.

    mesh_entity.py BACKEND PROTOCOL PREFIX MY_ID PEER_ID MODE [ARGS...]

BACKEND: pyzmq | native | wcomm. Modes:
    flood N SIZE HWM blocking|outbox   send N messages of SIZE bytes in bursts of 64 while
                                       reading the peer's N; prints "done" once both are done
    echo N                             reply {"echo": msg, "by": MY_ID} to N messages
    anchor                             hold the entity (conductor: the anchor lock), print
                                       "ready", idle until killed (at most 60 s)
"""
import sys
import time

from wireless_comm.mesh import (CommProtocol, NativeZMQCommunicator, OutboxCommunicator, WcommCommunicator,
                                ZMQCommunicator)


def make(backend, protocol, prefix, me, peer, hwm=0):
    protocol = CommProtocol(protocol)
    if backend == "pyzmq":
        if hwm:
            import os
            import zmq
            os.environ["MSTAR_ZMQ_SNDHWM"] = str(hwm)

            # A pyzmq entity sets only the send high-water mark; the test wants the receive one
            # at hwm too, and ZeroMQ takes it only before bind: PULL sockets get it at creation.
            class Context(zmq.Context):
                def socket(self, kind, *args, **kwargs):
                    s = super().socket(kind, *args, **kwargs)
                    if kind == zmq.PULL:
                        s.setsockopt(zmq.RCVHWM, hwm)
                    return s

            zmq.Context = Context
        return ZMQCommunicator(me, [peer], protocol, prefix)
    kwargs = {"sndhwm": hwm, "rcvhwm": hwm} if hwm else {}
    cls = NativeZMQCommunicator if backend == "native" else WcommCommunicator
    return cls(me, [peer], protocol, prefix, **kwargs)


def flood(c, peer, n, size, outbox_mode):
    o = OutboxCommunicator(c) if outbox_mode else c
    msg = {"blob": b"x" * size}
    received = 0
    for i in range(n):
        o.send(peer, msg)
        if (i + 1) % 64 == 0:
            received += len(o.get_all_new_messages())
            print(f"sent {i + 1} received {received}", file=sys.stderr, flush=True)
    while received < n or (outbox_mode and o.flush()):
        received += len(o.get_all_new_messages(blocking=True, timeout_s=0.05))
    print("done", flush=True)
    c.send(peer, {"done": 1})
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(m == {"done": 1} for m in c.get_all_new_messages(blocking=True, timeout_s=0.1)):
            break


def main():
    backend, protocol, prefix, me, peer, mode, *args = sys.argv[1:]
    if mode == "flood":
        n, size, hwm, how = int(args[0]), int(args[1]), int(args[2]), args[3]
        flood(make(backend, protocol, prefix, me, peer, hwm), peer, n, size, how == "outbox")
    elif mode == "echo":
        c = make(backend, protocol, prefix, me, peer)
        print("ready", flush=True)
        left = int(args[0])
        deadline = time.monotonic() + 60
        while left and time.monotonic() < deadline:
            for msg in c.get_all_new_messages(blocking=True, timeout_s=0.5):
                c.send(peer, {"echo": msg, "by": me})
                left -= 1
        # The last replies must leave before LINGER 0 drops them: wait for the peer's word.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not c.get_all_new_messages(blocking=True, timeout_s=0.1):
            pass
    elif mode == "anchor":
        c = make(backend, protocol, prefix, me, peer)
        print("ready", flush=True)
        c.get_all_new_messages(blocking=True, timeout_s=60)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
