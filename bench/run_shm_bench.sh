#!/usr/bin/env bash
# Same-host transports, each figure beside its reference measured in the same run (issue
# "Same-host peers at memory speed"): 64 MiB one-way goodput over shm (cross-memory attach, and
# the ring with WCOMM_SHM_CMA=0) vs a one-thread memcpy and vs tcp; 64 B round trip over shm vs
# tcp without busy polling (and beside its floor, two eventfd wake-ups between two processes:
# raw_wakeup_pingpong), and over shm with busy polling vs ucx_perftest tag_lat over UCX
# shared memory (UCX_TLS=posix,self; it reports half a round trip, doubled here) and beside
# the shm transport's own busy-polled round trip below the Comm API (shm_ring_pingpong, 130 B:
# the size of a 64 B message's frame), the busy-polled pairs pinned one process per core
# (WCOMM_BENCH_PIN=1, taskset for ucx_perftest); unix vs tcp
# goodput at 1 KiB .. 64 MiB, pinned the same way (unpinned, where the scheduler put the two
# processes moved a 64 KiB unix turn between 2.0 and 4.1 GB/s); peak RSS of a 200 MiB receive
# over shm. The 64 MiB rows: the receiver's recv_into (posted 1 ahead, and 5 ahead of the
# sender's 4 in flight), plain recv, and plain recv with a block cache large enough for every
# 64 MiB block in flight. Prints a markdown table.
# Usage: bench/run_shm_bench.sh [build-dir]. Environment: REPEAT (turns, default 3),
# ROUNDS (ping-pong rounds per turn, default 5000).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="$(cd "${1:-$root/build}" && pwd)"
repeat="${REPEAT:-3}"
rounds="${ROUNDS:-5000}"
python=/usr/bin/python3
for b in memcpy_bw api_goodput api_pingpong recv_rss raw_wakeup_pingpong shm_ring_pingpong; do
  [ -x "$build/bench/$b" ] || { echo "run_shm_bench: build $b first (cmake --build $build --target $b)" >&2; exit 1; }
done
command -v ucx_perftest >/dev/null || { echo "run_shm_bench: ucx_perftest is missing (ucx-utils)" >&2; exit 1; }

work="$(mktemp -d /tmp/wcomm-shm-bench.XXXXXX)"
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT
say() { echo "run_shm_bench: $*" >&2; }
# The median of key over a file's JSON lines (other lines, such as log lines, are skipped).
median() { "$python" -c 'import json,sys,statistics; k=sys.argv[2]; print(statistics.median(json.loads(l)[k] for l in open(sys.argv[1]) if l.startswith("{")))' "$1" "$2"; }

say "64 MiB goodput: memcpy, shm (cma), shm (ring), tcp, shm and tcp with plain recv; $repeat turns"
for _ in $(seq "$repeat"); do
  "$build/bench/memcpy_bw" >>"$work/memcpy.jsonl"
  "$build/bench/api_goodput" 67108864 16 shm >>"$work/g_shm.jsonl"
  # recv_into as it is meant to be used: posted ahead of the sender (5 > its 4 in flight).
  "$build/bench/api_goodput" 67108864 16 shm 5 >>"$work/g_shm_ahead.jsonl"
  WCOMM_SHM_CMA=0 "$build/bench/api_goodput" 67108864 16 shm >>"$work/g_ring.jsonl"
  "$build/bench/api_goodput" 67108864 16 tcp >>"$work/g_tcp.jsonl"
  # Plain recv (storage the library allocates): no copy from an inbox into a recv_into tensor.
  "$build/bench/api_goodput" 67108864 16 shm recv >>"$work/g_shm_recv.jsonl"
  "$build/bench/api_goodput" 67108864 16 tcp recv >>"$work/g_tcp_recv.jsonl"
  # The same with a block cache that holds every block in flight (the default 256 MiB holds
  # four of 64 MiB; over shm more are alive at once, and the others are fresh, faulting memory).
  WCOMM_BLOCK_CACHE_BYTES=1073741824 "$build/bench/api_goodput" 67108864 16 shm recv >>"$work/g_shm_recv_cache.jsonl"
  WCOMM_BLOCK_CACHE_BYTES=1073741824 "$build/bench/api_goodput" 67108864 16 tcp recv >>"$work/g_tcp_recv_cache.jsonl"
done

say "64 B round trip: shm and tcp without busy polling, shm with 200 us of it (recv and recv_for), ucx tag_lat; $repeat turns"
ucx_port=$((20000 + RANDOM % 30000))
for turn in $(seq "$repeat"); do
  "$build/bench/api_pingpong" "$rounds" 64 0 shm >>"$work/rtt_shm.jsonl"
  "$build/bench/api_pingpong" "$rounds" 64 0 tcp >>"$work/rtt_tcp.jsonl"
  WCOMM_BENCH_PIN=1 "$build/bench/api_pingpong" "$rounds" 64 200 shm >>"$work/rtt_shm_busy.jsonl"
  # The same through Comm::recv_for (no waiter or promise for a message its thread reads).
  "$build/bench/api_pingpong" "$rounds" 64 0 shm recv_for >>"$work/rtt_shm_for.jsonl"
  WCOMM_BENCH_PIN=1 "$build/bench/api_pingpong" "$rounds" 64 200 shm recv_for >>"$work/rtt_shm_busy_for.jsonl"
  WCOMM_BENCH_PIN=1 "$build/bench/shm_ring_pingpong" "$rounds" 130 >>"$work/rtt_ring.jsonl"
  # The floor of any round trip whose two sides sleep until woken: two eventfd wake-ups.
  "$build/bench/raw_wakeup_pingpong" "$rounds" >>"$work/rtt_wakeup.jsonl"
  UCX_TLS=posix,self taskset -c 0 ucx_perftest -p "$ucx_port" >/dev/null 2>&1 &
  for _ in $(seq 50); do  # the server needs a moment to listen
    if UCX_TLS=posix,self taskset -c 1 ucx_perftest 127.0.0.1 -p "$ucx_port" -t tag_lat -s 64 -n "$rounds" >"$work/ucx.$turn.txt" 2>/dev/null; then break; fi
    sleep 0.1
  done
  wait || true
  # "Final: iterations p50 average overall ...": the p50 of half a round trip, in us.
  "$python" -c 'import sys,json; f=[l.split() for l in open(sys.argv[1]) if l.startswith("Final:")][0]; print(json.dumps({"p50_us": 2*float(f[2])}))' \
    "$work/ucx.$turn.txt" >>"$work/rtt_ucx.jsonl"
  ucx_port=$((ucx_port + 1))
done

say "unix vs tcp goodput by size (pinned one process per core)"
for spec in "1024 20000" "65536 4000" "1048576 400" "67108864 16"; do
  set -- $spec
  for _ in $(seq "$repeat"); do
    WCOMM_BENCH_PIN=1 "$build/bench/api_goodput" "$1" "$2" unix >>"$work/u_$1.jsonl"
    WCOMM_BENCH_PIN=1 "$build/bench/api_goodput" "$1" "$2" tcp >>"$work/t_$1.jsonl"
  done
done

say "peak RSS of a 200 MiB receive over shm"
"$build/bench/recv_rss" 200 --transport shm >"$work/rss.json"

memcpy="$(median "$work/memcpy.jsonl" gb_s)"
g_shm="$(median "$work/g_shm.jsonl" goodput_gb_s)"
g_ring="$(median "$work/g_ring.jsonl" goodput_gb_s)"
g_shm_ahead="$(median "$work/g_shm_ahead.jsonl" goodput_gb_s)"
g_tcp="$(median "$work/g_tcp.jsonl" goodput_gb_s)"
g_shm_recv="$(median "$work/g_shm_recv.jsonl" goodput_gb_s)"
g_tcp_recv="$(median "$work/g_tcp_recv.jsonl" goodput_gb_s)"
g_shm_recv_cache="$(median "$work/g_shm_recv_cache.jsonl" goodput_gb_s)"
g_tcp_recv_cache="$(median "$work/g_tcp_recv_cache.jsonl" goodput_gb_s)"
r_shm="$(median "$work/rtt_shm.jsonl" p50_us)"
r_tcp="$(median "$work/rtt_tcp.jsonl" p50_us)"
r_busy="$(median "$work/rtt_shm_busy.jsonl" p50_us)"
r_ucx="$(median "$work/rtt_ucx.jsonl" p50_us)"
r_wakeup="$(median "$work/rtt_wakeup.jsonl" p50_us)"
r_ring="$(median "$work/rtt_ring.jsonl" p50_us)"
r_for="$(median "$work/rtt_shm_for.jsonl" p50_us)"
r_busy_for="$(median "$work/rtt_shm_busy_for.jsonl" p50_us)"
"$python" - "$work" "$memcpy" "$g_shm" "$g_ring" "$g_tcp" "$r_shm" "$r_tcp" "$r_busy" "$r_ucx" "$g_shm_recv" "$g_tcp_recv" "$g_shm_recv_cache" "$g_tcp_recv_cache" "$r_wakeup" "$g_shm_ahead" "$r_ring" "$r_for" "$r_busy_for" <<'PY'
import json, statistics, sys
work = sys.argv[1]
memcpy, g_shm, g_ring, g_tcp, r_shm, r_tcp, r_busy, r_ucx, g_shm_recv, g_tcp_recv, g_shm_rc, g_tcp_rc, r_wakeup, g_shm_ahead, r_ring, r_for, r_busy_for = map(float, sys.argv[2:])
print("| figure | wcomm | reference (same run) | ratio | target |")
print("|---|---|---|---|---|")
print(f"| 64 MiB goodput, shm (cross-memory attach), recv_into posted 1 ahead | {g_shm:.2f} GB/s | memcpy {memcpy:.2f} GB/s | {g_shm/memcpy:.2f}x | >= 0.8x |")
print(f"| 64 MiB goodput, shm vs tcp | {g_shm:.2f} GB/s | tcp {g_tcp:.2f} GB/s | {g_shm/g_tcp:.2f}x | >= 3x |")
print(f"| 64 MiB goodput, shm, recv_into posted 5 ahead | {g_shm_ahead:.2f} GB/s | memcpy {memcpy:.2f} GB/s | {g_shm_ahead/memcpy:.2f}x | >= 0.8x |")
print(f"| 64 MiB goodput, shm, plain recv | {g_shm_recv:.2f} GB/s | memcpy {memcpy:.2f} GB/s; tcp, plain recv {g_tcp_recv:.2f} GB/s | {g_shm_recv/memcpy:.2f}x; {g_shm_recv/g_tcp_recv:.2f}x | >= 0.8x; >= 3x |")
print(f"| 64 MiB goodput, shm, plain recv, WCOMM_BLOCK_CACHE_BYTES=1GiB | {g_shm_rc:.2f} GB/s | memcpy {memcpy:.2f} GB/s; tcp, same {g_tcp_rc:.2f} GB/s | {g_shm_rc/memcpy:.2f}x; {g_shm_rc/g_tcp_rc:.2f}x | >= 0.8x; >= 3x |")
print(f"| 64 MiB goodput, shm ring (WCOMM_SHM_CMA=0) | {g_ring:.2f} GB/s | memcpy {memcpy:.2f} GB/s | {g_ring/memcpy:.2f}x | (fallback) |")
print(f"| 64 B round trip p50, no busy polling | shm {r_shm:.1f} us | tcp {r_tcp:.1f} us | {r_shm/r_tcp:.2f}x | <= 0.3x |")
print(f"| 64 B round trip p50, no busy polling, vs its floor | shm {r_shm:.1f} us | two eventfd wake-ups {r_wakeup:.1f} us (tcp: {r_wakeup/r_tcp:.2f}x tcp) | {r_shm/r_wakeup:.2f}x | (fair reference) |")
print(f"| 64 B round trip p50, no busy polling, recv_for | shm {r_for:.1f} us | tcp {r_tcp:.1f} us | {r_for/r_tcp:.2f}x | <= 0.3x |")
print(f"| 64 B round trip p50, busy polling 200 us | shm {r_busy:.2f} us | ucx tag_lat posix,self {r_ucx:.2f} us | {r_busy/r_ucx:.2f}x | <= 2x |")
print(f"| 64 B round trip p50, busy polling 200 us, recv_for | shm {r_busy_for:.2f} us | ucx tag_lat posix,self {r_ucx:.2f} us | {r_busy_for/r_ucx:.2f}x | <= 2x |")
print(f"| busy-polled round trip of the shm transport alone (130 B, no Comm API) | {r_ring:.2f} us | ucx tag_lat posix,self {r_ucx:.2f} us | {r_ring/r_ucx:.2f}x | (fair reference) |")
for size in (1024, 65536, 1048576, 67108864):
    u = statistics.median(json.loads(l)["goodput_gb_s"] for l in open(f"{work}/u_{size}.jsonl") if l.startswith("{"))
    t = statistics.median(json.loads(l)["goodput_gb_s"] for l in open(f"{work}/t_{size}.jsonl") if l.startswith("{"))
    print(f"| goodput {size} B, unix vs tcp (pinned) | {u:.3f} GB/s | tcp {t:.3f} GB/s | {u/t:.2f}x | >= 1.0x |")
rss = json.load(open(f"{work}/rss.json"))
print(f"| peak RSS growth, 200 MiB receive over shm | {rss['delta_kib']/1024:.0f} MiB | 200 MiB | {rss['delta_over_payload']:.2f}x | <= 1.1x |")
PY
