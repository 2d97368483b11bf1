#!/usr/bin/python3
"""wcomm's Group against torch.distributed's gloo backend over TCP, in the same run, 4 ranks on
this host: allreduce (sum, float32) of 1 MiB and 64 MiB and barrier, each measured the same way
(wcomm twice: over TCP like gloo, then with Comm's default auto transport: shm on one host)
(a barrier, then one timed call; p50 over the rounds on rank 0), then the reduction kernel
against a one-thread memcpy (collectives_allreduce prints it).

    /usr/bin/python3 bench/collectives_vs_gloo.py [--ranks 4] [--rounds 10] [--build build]

gloo's part follows ../shared/bench-anchors/torch_gloo.py (bench/anchors/torch_gloo.py), adding
the barrier timing."""

import argparse
import os
import socket
import subprocess
import sys
import time

SIZES = [1 << 20, 64 << 20]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gloo_rank(rank, world, port, rounds):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for n in SIZES:
        x = torch.ones(n // 4, dtype=torch.float32)
        dist.all_reduce(x)
        ts = []
        for _ in range(rounds):
            dist.barrier()
            s = time.perf_counter()
            dist.all_reduce(x)
            ts.append(time.perf_counter() - s)
        ts.sort()
        if rank == 0:
            print(f"gloo allreduce world={world} bytes={n} p50_ms={ts[len(ts) // 2] * 1e3:.2f}", flush=True)
    us = []
    for _ in range(20 * rounds):
        s = time.perf_counter()
        dist.barrier()
        us.append((time.perf_counter() - s) * 1e6)
    us.sort()
    if rank == 0:
        print(f"gloo barrier world={world} p50_us={us[len(us) // 2]:.1f}", flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    import torch.multiprocessing as mp

    print(f"# host: {os.cpu_count()} CPUs; {args.ranks} ranks; {args.rounds} rounds; {time.strftime('%Y-%m-%d %H:%M:%S')}",
          flush=True)
    mp.spawn(gloo_rank, args=(args.ranks, free_port(), args.rounds), nprocs=args.ranks)
    exe = os.path.join(args.build, "bench", "collectives_allreduce")
    sizes = ",".join(str(s) for s in SIZES)
    # wcomm over TCP (as gloo), then with Comm's default `auto` transport (shared memory
    # between ranks on one host).
    print("# wcomm, transport tcp", flush=True)
    subprocess.run([exe, str(args.ranks), str(args.rounds), sizes], check=True,
                   env=dict(os.environ, WCOMM_BENCH_TRANSPORT="tcp"))
    print("# wcomm, transport auto (shm on one host)", flush=True)
    subprocess.run([exe, str(args.ranks), str(args.rounds), sizes], check=True)
    mp.spawn(gloo_rank, args=(args.ranks, free_port(), args.rounds), nprocs=args.ranks)  # again: drift check


if __name__ == "__main__":
    sys.exit(main())
