"""One rank of a launcher test (test_group_launchers.py): joins the group from the launcher's
environment, checks an allreduce, a broadcast and a barrier, and prints one line."""

import asyncio
import sys

import numpy as np

from wireless_comm import Group


async def main():
    spec = Group.spec_from_env()
    async with await Group.from_env(rendezvous_timeout=60, timeout=60) as g:
        w = g.world_size
        x = np.arange(1001, dtype=np.float32) * (g.rank + 1)
        await g.allreduce(x)
        assert np.array_equal(x, np.arange(1001, dtype=np.float32) * (w * (w + 1) // 2)), x[:4]
        big = np.full(300000, g.rank, dtype=np.int64)
        await g.allreduce(big, op="max")
        assert (big == w - 1).all()
        b = np.full(7, g.rank, dtype=np.int32)
        await g.broadcast(b, root=w - 1)
        assert (b == w - 1).all()
        await g.barrier()
        print(f"ok rank={g.rank} world={w} source={spec['source']}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
