"""Responsiveness under load through the Python API (issue 17): CommOptions.priority and
.compress, the new CommConfig keys, and chunked frames letting a small message overtake a
bulk transfer on another tag."""

import asyncio
import time

import pytest
import torch

from wireless_comm import CommConfig, CommOptions
from helpers import make_pair, run


def slow_tcp(**kw) -> CommConfig:
    # The scheduler's node-wide rate makes loopback a slow link: 8 MiB/s.
    return CommConfig(transport="tcp", chunk_bytes=64 << 10, egress_quantum_bytes=32 << 10,
                      egress_rate_bytes_per_second=8 << 20, **kw)


@pytest.mark.parametrize("bad, match", [
    (dict(priority="urgent"), "priority"),
    (dict(compress="yes"), "compress"),
])
def test_options_are_checked(bad, match):
    with pytest.raises(ValueError, match=match):
        CommOptions(**bad)


@pytest.mark.parametrize("bad, match", [
    (dict(chunk_bytes=100), "chunk_bytes"),
    (dict(compression="lz4"), "compression"),
    (dict(egress_max_bulk_flows=2), "egress_max_bulk_flows"),
    (dict(tcp_max_pacing_rate_bytes_per_second=1 << 32), "tcp_max_pacing_rate_bytes_per_second"),
    (dict(tcp_target_queue_delay_us=1_000_001), "tcp_target_queue_delay_us"),
])
def test_config_keys_are_checked(bad, match):
    with pytest.raises(ValueError, match=match):
        CommConfig(**bad)


def test_small_message_overtakes_bulk_and_explicit_bulk_waits():
    async def body():
        a, b = await make_pair(slow_tcp(), CommConfig(transport="tcp"))
        try:
            src, dst = b.peer("node-a"), a.peer("node-b")
            big = torch.arange(1 << 20, dtype=torch.int32)  # 4 MiB: about 0.5 s at 8 MiB/s
            start = time.monotonic()
            bulk = asyncio.create_task(a.send(big, dst, options=CommOptions(tag=1, compress=False)))
            await asyncio.sleep(0.05)
            await a.send("urgent", dst, options=CommOptions(tag=2, priority="high"))
            value, _ = await b.recv(src, options=CommOptions(tag=2))
            assert value == "urgent"
            assert time.monotonic() - start < 0.3
            got, _ = await b.recv(src, options=CommOptions(tag=1))
            assert torch.equal(got, big)
            await bulk
            assert a.stats()["messages_chunked"] >= 1

            start = time.monotonic()
            bulk = asyncio.create_task(a.send(big, dst, options=CommOptions(tag=1, compress=False)))
            await asyncio.sleep(0.05)
            await a.send("later", dst, options=CommOptions(tag=2, priority="bulk"))
            value, _ = await b.recv(src, options=CommOptions(tag=2))
            assert value == "later"
            assert time.monotonic() - start > 0.35  # same class as the transfer under way: after it
            await b.recv(src, options=CommOptions(tag=1))
            await bulk
        finally:
            await a.close()
            await b.close()

    run(body())


def test_compression_opt_in_and_out():
    async def body():
        a, b = await make_pair(slow_tcp(), CommConfig(transport="tcp"))
        try:
            src, dst = b.peer("node-a"), a.peer("node-b")
            zeros = torch.zeros(1 << 20, dtype=torch.float32)
            await a.send(zeros, dst, options=CommOptions(compress=False))
            got, _ = await b.recv(src)
            assert torch.equal(got, zeros)
            assert b.stats()["bytes_decompressed"] == 0
            await a.send(zeros, dst, options=CommOptions(compress=True))
            got, _ = await b.recv(src)
            assert torch.equal(got, zeros)
            assert b.stats()["bytes_decompressed"] > 0
            s = a.stats()
            assert s["compression_bytes_out"] < s["compression_bytes_in"]
            assert s["compression_seconds"] > 0
        finally:
            await a.close()
            await b.close()

    run(body())
