"""The encoder-cache service from Python: a producer process, this process the consumer."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from helpers import PYTHON, finish, free_port, start
from wireless_comm import Peer, xfer

PRODUCER = r"""
import sys
from wireless_comm import Peer, xfer
port, consumer_port, backend = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
p = xfer.CacheProducer(Peer("producer", "127.0.0.1", port), [Peer("consumer", "127.0.0.1", consumer_port)],
                       "model-x", "float16", 4096, backend=backend)
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "publish":
        p.publish(cmd[1], bytes(range(256)) * int(cmd[2]))
        print("published", flush=True)
    elif cmd[0] == "parked":
        print(p.parked_requests, flush=True)
    else:
        break
p.close()
"""


@pytest.mark.parametrize("backend", ["cma", "tcp"])
def test_park_then_drain_bytes_match_and_mismatch_refused(backend):
    pport, cport = free_port(), free_port()
    child = start([PYTHON, "-c", PRODUCER, str(pport), str(cport), backend], stdin=subprocess.PIPE)
    region = xfer.SharedRegion.create(f"wcomm-pytest-cache-{os.getpid()}", 64, 4096)
    consumer = None
    try:
        assert child.stdout.readline().strip() == "ready"
        consumer = xfer.CacheConsumer(Peer("consumer", "127.0.0.1", cport), [Peer("producer", "127.0.0.1", pport)],
                                      region, "model-x", "float16", backend=backend, request_timeout=20)
        n = 256 * 40  # 10 KiB: three blocks
        consumer.request("k", "producer", n)
        deadline = time.monotonic() + 20
        while True:  # bounded: until the producer holds the request parked
            child.stdin.write("parked\n")
            child.stdin.flush()
            if child.stdout.readline().strip() == "1" or time.monotonic() > deadline:
                break
        assert consumer.probe("k").readiness == "in_flight"
        child.stdin.write("publish k 40\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "published"
        while consumer.probe("k").readiness == "in_flight" and time.monotonic() < deadline:
            time.sleep(0.001)
        item = consumer.take("k")
        assert item.bytes == n and len(item.blocks) == 3
        assert region.read(item.blocks, n) == bytes(range(256)) * 40
        region.free(item.blocks)
        consumer.close()

        other = xfer.CacheConsumer(Peer("consumer", "127.0.0.1", cport), [Peer("producer", "127.0.0.1", pport)],
                                   region, "model-y", "float16", backend=backend, request_timeout=20)
        other.request("k", "producer", n)
        while other.probe("k").readiness == "in_flight" and time.monotonic() < deadline:
            time.sleep(0.001)
        # probe reports a failure once; ask again through a fresh request to read it.
        other.request("k", "producer", n)
        status = other.probe("k")
        while status.readiness == "in_flight" and time.monotonic() < deadline:
            time.sleep(0.001)
            status = other.probe("k")
        assert status.readiness == "failed"
        assert "compatibility hash mismatch" in status.reason
        assert xfer.compat_hash("model-y", "float16", 4096) in status.reason
        assert region.free_blocks == 64
        other.close()
        child.stdin.write("exit\n")
        child.stdin.flush()
        code, _, err = finish(child)
        assert code == 0, err
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
