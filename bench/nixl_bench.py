#!/usr/bin/python3
"""wireless_comm.nixl's two speed figures, each beside references measured in the same run:

1. a 64 MiB WRITE into another process on this host through wireless_comm.nixl ("UCX": cma
   here), against a one-thread memcpy of 64 MiB (libc's, through ctypes.memmove; both buffers
   pre-faulted) and
   the same WRITE through wireless_comm.xfer directly;
2. 4 KiB prepared transfers by index with 64 in flight (64 one-descriptor handles, each posted
   again as soon as it is done), per second; and the same 4 KiB blocks 64 to a handle.

    /usr/bin/python3 bench/nixl_bench.py [--iters 10] [--seconds 3]

Targets (issue 29): 64 MiB >= 0.8x memcpy; >= 50,000 4 KiB transfers/s.

--huge-pages puts every 64 MiB buffer (both processes', the memcpy's too) in memory advised
MADV_HUGEPAGE, as xfer.Agent.allocate does (this kernel's THP mode is madvise): the pages
process_vm_writev pins are then 2 MiB ones.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))  # (the installed wireless_comm is measured)
SIZE, BLOCK, INFLIGHT = 64 << 20, 4096, 64

def host_buffer(n: int, huge: bool) -> np.ndarray:
    """n writable bytes, pre-faulted; in MADV_HUGEPAGE memory when huge."""
    if not huge:
        return np.ones(n, np.uint8)
    import mmap
    m = mmap.mmap(-1, n)
    m.madvise(mmap.MADV_HUGEPAGE)
    a = np.frombuffer(m, np.uint8)  # (keeps the mapping alive)
    a[:] = 1
    return a


TARGET = r"""
import sys
import numpy as np
sys.path.insert(0, %r)
from nixl_bench import host_buffer
from wireless_comm import xfer
from wireless_comm.nixl import nixl_agent, nixl_agent_config
mem = host_buffer(%d, sys.argv[1] == "huge")
n = nixl_agent("bench-target", nixl_agent_config(backends=["UCX"]))
n.register_memory(mem)
x = xfer.Agent("bench-xfer-target")
x.register(mem)
print(mem.ctypes.data, n.get_agent_metadata().hex(), x.metadata().hex(), flush=True)
sys.stdin.readline()
""" % (HERE, SIZE)


def median_s(fn, iters: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--huge-pages", action="store_true", help="64 MiB buffers in MADV_HUGEPAGE memory")
    args = ap.parse_args()

    from wireless_comm import xfer
    from wireless_comm.nixl import nixl_agent, nixl_agent_config

    child = subprocess.Popen([sys.executable, "-c", TARGET, "huge" if args.huge_pages else "plain"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        base, nmd, xmd = child.stdout.readline().split()
        base = int(base)
        src, ref_dst = host_buffer(SIZE, args.huge_pages), host_buffer(SIZE, args.huge_pages)
        src[:] = 3

        # 1. 64 MiB: memcpy, xfer, nixl, taking turns so the machine's state is shared
        xa = xfer.Agent("bench-xfer-init")
        xa.register(src)
        xr = xa.add_remote(bytes.fromhex(xmd))
        na = nixl_agent("bench-init", nixl_agent_config(backends=["UCX"]))
        na.register_memory(src)
        nr = na.add_remote_agent(bytes.fromhex(nmd))
        big = na.initialize_xfer("WRITE", na.get_xfer_descs([(src.ctypes.data, SIZE, 0)], "DRAM"),
                                 na.get_xfer_descs([(base, SIZE, 0)], "DRAM"), nr)

        def xfer_write():
            h = xa.post("write", [(src.ctypes.data, SIZE, 0)], xr, [(base, SIZE, 0)])
            assert xa.wait(h, 30) == ("done", "")
            xa.release(h)

        def nixl_write():
            na.transfer(big)
            assert na.wait_xfer(big, 30) == "DONE", na.get_xfer_error(big)

        rows = {"memcpy": [], "xfer": [], "nixl": []}
        for _ in range(3):
            rows["memcpy"].append(median_s(lambda: ctypes.memmove(ref_dst.ctypes.data, src.ctypes.data, SIZE),
                                           args.iters))
            rows["xfer"].append(median_s(xfer_write, args.iters))
            rows["nixl"].append(median_s(nixl_write, args.iters))
        gbs = {k: SIZE / statistics.median(v) / 1e9 for k, v in rows.items()}
        na.release_xfer_handle(big)

        # 2. 4 KiB by index, 64 in flight
        lh = na.prep_xfer_dlist("NIXL_INIT_AGENT", [(src.ctypes.data + i * BLOCK, BLOCK, 0) for i in range(256)], "DRAM")
        rh = na.prep_xfer_dlist(nr, [(base + i * BLOCK, BLOCK, 0) for i in range(256)], "DRAM")
        ring = [na.make_prepped_xfer("WRITE", lh, [i], rh, [i]) for i in range(INFLIGHT)]
        count, t0 = 0, time.perf_counter()
        for h in ring:
            na.transfer(h)
        while time.perf_counter() - t0 < args.seconds:
            for h in ring:
                while na.check_xfer_state(h) == "PROC":
                    pass
                na.transfer(h)
                count += 1
        for h in ring:
            na.wait_xfer(h, 10)
        single_rate = count / (time.perf_counter() - t0)
        # the same blocks 64 to a handle (every other block, so nothing merges), 4 handles in flight
        batch = [na.make_prepped_xfer("WRITE", lh, list(range(k, 128 + k, 2)), rh, list(range(k, 128 + k, 2)))
                 for k in range(4)]
        count, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            for h in batch:
                na.transfer(h)
            for h in batch:
                assert na.wait_xfer(h, 10) == "DONE"
            count += 64 * len(batch)
        batch_rate = count / (time.perf_counter() - t0)
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    print("| figure | wireless_comm.nixl | reference (same run) | ratio | target |")
    print("|---|---|---|---|---|")
    memory = "MADV_HUGEPAGE" if args.huge_pages else "plain"
    print(f"| 64 MiB WRITE, two processes (cma), {memory} memory | {gbs['nixl']:.2f} GB/s | one-thread memcpy {gbs['memcpy']:.2f} GB/s"
          f" | **{gbs['nixl'] / gbs['memcpy']:.2f}x** | >= 0.8x |")
    print(f"| same | | wireless_comm.xfer {gbs['xfer']:.2f} GB/s | {gbs['nixl'] / gbs['xfer']:.2f}x | |")
    print(f"| 4 KiB prepared transfers by index, 64 in flight | **{single_rate:,.0f} /s** | | | >= 50,000/s |")
    print(f"| 4 KiB blocks, 64 to a handle, 4 handles in flight | {batch_rate:,.0f} blocks/s | | | |")


if __name__ == "__main__":
    main()
