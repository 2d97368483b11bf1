#!/usr/bin/env bash
# One-sided transfer figures, each beside its reference from the same run (docs/performance.md):
#   64 MiB cma WRITE into another process      vs a one-thread memcpy of 64 MiB
#   64 MiB ucx WRITE over UCX's tcp transport  vs ucx_perftest -t ucp_put_bw (ucx-utils), same size
#   64 MiB ucx WRITE over UCX's shared memory  vs a one-thread memcpy of 64 MiB (target memory from
#                                              Agent::allocate_memory, and plain heap memory)
#   4 KiB cma WRITEs with 64 in flight         transfers per second
# Usage: bench/transfer/run_xfer_bench.sh [build-dir]   (ITERS, default 10; SECONDS, default 5)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$(dirname "$here")")"
build="$(cd "${1:-$root/build}" && pwd)"
bench="$build/bench/transfer/xfer_bench"
iters="${ITERS:-10}"
seconds="${SECONDS_SMALL:-5}"
size=$((64 << 20))
[ -x "$bench" ] || { echo "run_xfer_bench: build it first: cmake --build $build --target xfer_bench" >&2; exit 1; }
command -v ucx_perftest >/dev/null || { echo "run_xfer_bench: ucx_perftest is missing (ucx-utils; scripts/bootstrap.sh)" >&2; exit 1; }

echo "== cma WRITE 64 MiB vs memcpy (buffers on 4 KiB pages)"
"$bench" write cma "$size" "$iters"
echo "== cma WRITE 64 MiB vs memcpy (both buffers madvise(MADV_HUGEPAGE) before first touch)"
XFER_BENCH_HUGEPAGES=1 "$bench" write cma "$size" "$iters"

echo "== ucx WRITE 64 MiB over UCX_TLS=tcp"
UCX_TLS=tcp "$bench" write ucx "$size" "$iters"
echo "== reference: ucx_perftest -t ucp_put_bw -s 64 MiB over UCX_TLS=tcp"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
UCX_TLS=tcp ucx_perftest -p "$port" >/tmp/xfer-perftest-server.$$ 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f /tmp/xfer-perftest-server.$$' EXIT
# The server needs a moment to listen; the client retries until it connects (bounded).
for _ in $(seq 1 50); do
  if out=$(UCX_TLS=tcp timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t ucp_put_bw -s "$size" -n "$iters" -w 2 2>&1); then break; fi
  sleep 0.1
done
echo "$out" | tail -4

echo "== ucx WRITE 64 MiB over UCX_TLS=posix,self into Agent::allocate_memory (UCX-allocated shm; reference: memcpy in the same run)"
XFER_BENCH_ALLOCATE=1 UCX_TLS=posix,self "$bench" write ucx "$size" "$iters"
echo "== the same into plain heap memory (UCX emulates RMA over shared memory it did not allocate)"
UCX_TLS=posix,self "$bench" write ucx "$size" "$iters"

echo "== 4 KiB cma WRITEs, 64 in flight"
"$bench" small cma 4096 "$seconds" 64
