"""wireless_comm.Group: every collective x dtype x op on numpy arrays and torch tensors, in
place, against numpy references; asyncio (await group.allreduce(t)) and blocking calls; bad
input fails every rank."""

import asyncio

import numpy as np
import pytest
import torch

from helpers import free_port
from wireless_comm import CollectiveError, Group, OperationTimeoutError

NP_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8]
OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
       "xor": np.bitwise_xor, "and": np.bitwise_and, "or": np.bitwise_or}


async def make_world(world, **kwargs):
    port = free_port()
    return await asyncio.gather(*(Group.create(r, world, master_addr="127.0.0.1", master_port=port,
                                               bind_host="127.0.0.1", rendezvous_timeout=20, **kwargs)
                                  for r in range(world)))


def values(dtype, rank, n):
    i = np.arange(n)
    v = (rank * 7 + i * 3 + i // 11) % 5
    return (v % 3 + 1).astype(dtype) if dtype == np.uint8 else (v - 2).astype(dtype)


def as_bits(a):
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def reference(dtype, op, world, n):
    parts = [values(dtype, r, n) for r in range(world)]
    if op in ("xor", "and", "or"):
        acc = as_bits(parts[0]).copy()
        for p in parts[1:]:
            acc = OPS[op](acc, as_bits(p))
        return acc.view(dtype)
    acc = parts[0].copy()
    for p in parts[1:]:
        acc = OPS[op](acc, p)
    return acc


@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_allreduce_every_numpy_dtype_and_op(world):
    async def main():
        groups = await make_world(world, small_allreduce_bytes=512, segment_bytes=1024)
        try:
            for dtype in NP_DTYPES:
                for op in OPS:
                    for n in (1, 7, 1001):
                        arrays = [values(dtype, g.rank, n) for g in groups]
                        await asyncio.gather(*(g.allreduce(a, op=op) for g, a in zip(groups, arrays)))
                        want = reference(dtype, op, world, n)
                        for a in arrays:
                            np.testing.assert_array_equal(a, want, err_msg=f"{dtype} {op} n={n}")
        finally:
            for g in groups:
                g.close()
    asyncio.run(main())


def test_torch_tensors_in_place_including_bfloat16():
    async def main():
        groups = await make_world(3)
        try:
            for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.int64):
                for op in ("sum", "max", "prod"):
                    ts = [torch.from_numpy(values(np.float32, g.rank, 3001)).to(dtype) for g in groups]
                    ptrs = [t.data_ptr() for t in ts]
                    out = await asyncio.gather(*(g.allreduce(t, op=op) for g, t in zip(groups, ts)))
                    want = torch.from_numpy(reference(np.float64, op, 3, 3001)).to(dtype)
                    for t, o, p in zip(ts, out, ptrs):
                        assert o is t and t.data_ptr() == p  # in place
                        assert torch.equal(t, want), (dtype, op)
            # broadcast, allgather, reduce_scatter
            ts = [torch.full((10,), float(g.rank)) for g in groups]
            await asyncio.gather(*(g.broadcast(t, root=2) for g, t in zip(groups, ts)))
            assert all(torch.equal(t, torch.full((10,), 2.0)) for t in ts)
            outs = [torch.zeros(3 * 4, dtype=torch.int32) for _ in groups]
            await asyncio.gather(*(g.allgather(torch.full((4,), g.rank, dtype=torch.int32), o)
                                   for g, o in zip(groups, outs)))
            for o in outs:
                assert o.tolist() == [0] * 4 + [1] * 4 + [2] * 4
            inputs = [np.arange(10, dtype=np.float64) * (g.rank + 1) for g in groups]
            blocks = [np.zeros(4 if g.rank == 0 else 3) for g in groups]  # 10 = 4 + 3 + 3
            await asyncio.gather(*(g.reduce_scatter(i, b) for g, i, b in zip(groups, inputs, blocks)))
            full = np.arange(10, dtype=np.float64) * 6
            assert blocks[0].tolist() == full[:4].tolist()
            assert blocks[1].tolist() == full[4:7].tolist()
            assert blocks[2].tolist() == full[7:].tolist()
            await asyncio.gather(*(g.barrier() for g in groups))
        finally:
            for g in groups:
                g.close()
    asyncio.run(main())


def test_blocking_api_and_send_recv():
    async def main():
        groups = await make_world(2)
        a = np.arange(5, dtype=np.int32)
        b = np.zeros(5, dtype=np.int32)
        await asyncio.gather(groups[0].send(a, 1, tag=3), groups[1].recv(b, 0, tag=3))
        assert b.tolist() == [0, 1, 2, 3, 4]
        return groups
    groups = asyncio.run(main())
    import threading
    arrays = [np.ones(100, dtype=np.float32) * (g.rank + 1) for g in groups]
    threads = [threading.Thread(target=g.sync.allreduce, args=(x,)) for g, x in zip(groups, arrays)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all((x == 3).all() for x in arrays)
    for g in groups:
        g.close()


def test_mismatched_sizes_fail_every_rank_with_a_clear_error():
    async def main():
        groups = await make_world(3)
        arrays = [np.ones(100 + (g.rank == 1), dtype=np.float32) for g in groups]
        results = await asyncio.gather(*(g.allreduce(a) for g, a in zip(groups, arrays)), return_exceptions=True)
        for r in results:
            assert isinstance(r, CollectiveError) and isinstance(r, ValueError), r
            assert "same sizes" in str(r)
        # The group is broken now: later calls fail at once.
        with pytest.raises(CollectiveError, match="earlier call"):
            await groups[0].barrier()
        for g in groups:
            g.close()
    asyncio.run(main())


def test_a_rank_that_never_comes_times_out_every_other_rank():
    async def main():
        groups = await make_world(3)
        arrays = [np.ones(10, dtype=np.float32) for _ in groups]
        results = await asyncio.gather(*(g.allreduce(a, timeout=0.5) for g, a in zip(groups[:2], arrays)),
                                       return_exceptions=True)
        for r in results:
            assert isinstance(r, CollectiveError) and isinstance(r, OperationTimeoutError), r
            assert r.rank in (0, 1, 2)
        for g in groups:
            g.close()
    asyncio.run(main())


def test_bad_arguments():
    with pytest.raises(ValueError, match="world size must be at least 1"):
        Group.create_blocking(0, 0)
    with pytest.raises(ValueError, match="outside the world"):
        Group.create_blocking(3, 2, master_addr="127.0.0.1", master_port=1, rendezvous_timeout=0.2)
    g = Group.create_blocking(0, 1)
    with pytest.raises(ValueError, match="unknown reduction"):
        g.sync.allreduce(np.ones(3), op="mean")
    with pytest.raises(ValueError, match="torch tensor or a numpy array"):
        g.sync.allreduce([1, 2, 3])
    g.close()
