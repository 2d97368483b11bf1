#!/usr/bin/env bash
# Core performance figures on loopback, each beside its reference measured in the same run:
# 64 B round trip (raw blocking TCP vs the Comm API, with its default busy polling and with
# none, vs wcomm bench; the three ping-pongs take turns, REPEAT times, so that a drift of the
# machine reaches all of them alike, and each ratio is the median of the turns' ratios), one-stream goodput
# (iperf3, and raw TCP moving whole 1 MiB / 64 MiB buffers, vs wcomm bench upload of 1 MiB and
# 64 MiB messages), the Comm API over tcp and over unix sockets (64 B round trip in the same turns,
# 64 MiB goodput beside each other), and peak RSS of receiving a 200 MiB tensor. Prints a
# markdown table. Usage: bench/run_core_bench.sh [build-dir]
# Environment: ROUNDS (ping-pong rounds per turn, default 5000), REPEAT (turns, default 5),
# TRIALS (goodput trials, default 3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="$(cd "${1:-$root/build}" && pwd)"
rounds="${ROUNDS:-5000}"
repeat="${REPEAT:-5}"
trials="${TRIALS:-3}"
python=/usr/bin/python3  # Debian's interpreter (README.md); only its json module is used

need() { [ -x "$1" ] || { echo "run_core_bench: $1 is missing; build it first:" \
  "cmake --build $build -j2 --target wcomm_cli raw_tcp_pingpong api_pingpong api_goodput recv_rss raw_tcp_bulk" >&2; exit 1; }; }
for b in "$build/wcomm" "$build/bench/raw_tcp_pingpong" "$build/bench/api_pingpong" "$build/bench/recv_rss" \
  "$build/bench/raw_tcp_bulk" "$build/bench/api_goodput"; do need "$b"; done
command -v iperf3 >/dev/null || { echo "run_core_bench: iperf3 is not installed (scripts/bootstrap.sh)" >&2; exit 1; }

work="$(mktemp -d /tmp/wcomm-core-bench.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# jq-like access with Python's json: jget FILE EXPR (EXPR over the parsed value `r`).
jget() { "$python" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
say() { echo "run_core_bench: $*" >&2; }

say "ping-pong, $repeat turns of $rounds rounds: raw TCP, Comm API (default busy polling), Comm API (none)"
for turn in $(seq "$repeat"); do
  "$build/bench/raw_tcp_pingpong" "$rounds" 64 >"$work/raw.$turn.json"
  "$build/bench/api_pingpong" "$rounds" 64 >"$work/api.$turn.json"
  "$build/bench/api_pingpong" "$rounds" 64 0 >"$work/api_sleep.$turn.json"
  "$build/bench/api_pingpong" "$rounds" 64 20 unix >"$work/api_unix.$turn.json"
done

say "Comm API goodput, 64 MiB messages, tcp and unix taking turns, median of $trials"
for _ in $(seq "$trials"); do
  for t in tcp unix; do "$build/bench/api_goodput" 67108864 16 "$t" >>"$work/goodput_$t.jsonl"; done
done
median_lines() { "$python" -c 'import json,sys,statistics; print(statistics.median(json.loads(l)["goodput_gb_s"] for l in open(sys.argv[1])))' "$1"; }
api_g64_tcp="$(median_lines "$work/goodput_tcp.jsonl")"
api_g64_unix="$(median_lines "$work/goodput_unix.jsonl")"

say "iperf3, one stream, 5 s"
iperf_port=$((20000 + RANDOM % 30000))
iperf3 -s -1 -B 127.0.0.1 -p "$iperf_port" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 50); do  # the server needs a moment to listen; the client fails until then
  if iperf3 -c 127.0.0.1 -p "$iperf_port" -t 5 -J >"$work/iperf.json" 2>/dev/null; then break; fi
  sleep 0.1
done
iperf_gbps="$(jget "$work/iperf.json" 'r["end"]["sum_received"]["bits_per_second"]/8e9')"

say "raw TCP bulk: 256 MiB as 1 MiB and as 64 MiB buffers, median of $trials"
median_bulk() {  # median_bulk BYTES MESSAGES
  for _ in $(seq "$trials"); do "$build/bench/raw_tcp_bulk" "$1" "$2" >"$work/bulk.json"; jget "$work/bulk.json" 'r["goodput_gb_s"]'; done |
    sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}
raw1="$(median_bulk 1048576 256)"
raw64="$(median_bulk 67108864 4)"

say "wcomm bench: 64 B latency, upload goodput of 1 MiB and 64 MiB messages"
cat >"$work/b.yaml" <<YAML
local: {node_id: node-b, host: 127.0.0.1, port: 0}
peers: [{node_id: node-a, host: 127.0.0.1, port: 1}]
comm: {transport: tcp}
YAML
"$build/wcomm" bench --config "$work/b.yaml" responder --peer node-a --wait-timeout 60 2>"$work/responder.err" &
pids+=($!)
port=""
for _ in $(seq 100); do
  port="$(sed -n 's/.*listening on .*:\([0-9][0-9]*\)$/\1/p' "$work/responder.err")"
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/responder.err" >&2; exit 1; }
cat >"$work/a.yaml" <<YAML
local: {node_id: node-a, host: 127.0.0.1, port: 0}
peers: [{node_id: node-b, host: 127.0.0.1, port: $port}]
comm: {transport: tcp}
YAML
# 256 MiB per trial: 256 messages of 1 MiB, 4 of 64 MiB.
"$build/wcomm" bench --config "$work/a.yaml" initiator --peer node-b --quiet \
  --latency-sizes 64 --latency-rounds 2000 --directions upload \
  --throughput-sizes 1048576,67108864 --throughput-target-bytes 268435456 --throughput-trials "$trials" \
  --output "$work/wcomm.json"
wait "${pids[-1]}"

say "peak RSS of receiving a 200 MiB tensor"
"$build/bench/recv_rss" 200 >"$work/rss.json"
"$build/bench/recv_rss" 200 --into >"$work/rss_into.json"

# Medians over the turns: p50 and p99 of each program, and the per-turn ratio of p50s.
turns() {  # turns NAME KEY: the KEY of each turn's NAME.json, one per line
  for turn in $(seq "$repeat"); do jget "$work/$1.$turn.json" "r[\"$2\"]"; done
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ratio_median() {  # ratio_median NAME: median over turns of NAME's p50 / raw's p50
  paste <(turns "$1" p50_us) <(turns raw p50_us) | awk '{print $1/$2}' | median
}
raw50="$(turns raw p50_us | median)"; raw99="$(turns raw p99_us | median)"
api50="$(turns api p50_us | median)"; api99="$(turns api p99_us | median)"
sleep50="$(turns api_sleep p50_us | median)"; sleep99="$(turns api_sleep p99_us | median)"
api_ratio="$(ratio_median api)"; sleep_ratio="$(ratio_median api_sleep)"
unix50="$(turns api_unix p50_us | median)"; unix99="$(turns api_unix p99_us | median)"
unix_vs_tcp="$(paste <(turns api_unix p50_us) <(turns api p50_us) | awk '{print $1/$2}' | median)"
raw_all="$(turns raw p50_us | tr '\n' ' ')"; api_all="$(turns api p50_us | tr '\n' ' ')"
sleep_all="$(turns api_sleep p50_us | tr '\n' ' ')"
b50="$(jget "$work/wcomm.json" 'r["latency"][0]["summary_ms"]["p50"]*1e3')"
b99="$(jget "$work/wcomm.json" 'r["latency"][0]["summary_ms"]["p99"]*1e3')"
g1="$(jget "$work/wcomm.json" 'r["throughput"]["upload"][0]["aggregate_goodput_mbps"]["p50"]/8e3')"
g64="$(jget "$work/wcomm.json" 'r["throughput"]["upload"][1]["aggregate_goodput_mbps"]["p50"]/8e3')"
rss="$(jget "$work/rss.json" 'r["delta_over_payload"]')"; rss_mib="$(jget "$work/rss.json" 'r["delta_kib"]/1024')"
rssi="$(jget "$work/rss_into.json" 'r["delta_over_payload"]')"; rssi_mib="$(jget "$work/rss_into.json" 'r["delta_kib"]/1024')"

"$python" - "$raw50" "$raw99" "$api50" "$api99" "$b50" "$b99" "$iperf_gbps" "$g1" "$g64" "$rss" "$rss_mib" "$rssi" "$rssi_mib" \
  "$raw1" "$raw64" "$sleep50" "$sleep99" "$api_ratio" "$sleep_ratio" "$rounds" "$trials" "$repeat" \
  "$raw_all" "$api_all" "$sleep_all" "$unix50" "$unix99" "$unix_vs_tcp" "$api_g64_tcp" "$api_g64_unix" <<'PY'
import sys
(raw50, raw99, api50, api99, b50, b99, iperf, g1, g64, rss, rss_mib, rssi, rssi_mib, raw1, raw64,
 sleep50, sleep99, api_ratio, sleep_ratio) = map(float, sys.argv[1:20])
rounds, trials, repeat, raw_all, api_all, sleep_all = sys.argv[20:26]
unix50, unix99, unix_vs_tcp, api_g64_tcp, api_g64_unix = map(float, sys.argv[26:31])
print(f"Loopback, this machine, one run ({repeat} turns of {rounds} ping-pong rounds, medians over the turns; "
      f"median of {trials} goodput trials of 256 MiB).\n")
print("| what | 64 B RTT p50 | 64 B RTT p99 | 1 MiB goodput | 64 MiB goodput | ratio |")
print("|---|---:|---:|---:|---:|---|")
print(f"| raw TCP ping-pong (blocking, TCP_NODELAY) | {raw50:.1f} us | {raw99:.1f} us | | | reference |")
print(f"| Comm API ping-pong (send().get(), recv().get()), default 20 us busy polling | {api50:.1f} us | {api99:.1f} us | | "
      f"| p50 {api_ratio:.2f}x raw |")
print(f"| Comm API ping-pong, recv_busy_poll_us 0 (sleeps at once) | {sleep50:.1f} us | {sleep99:.1f} us | | "
      f"| p50 {sleep_ratio:.2f}x raw |")
print(f"| Comm API ping-pong over a unix socket, default busy polling | {unix50:.1f} us | {unix99:.1f} us | | "
      f"| p50 {unix_vs_tcp:.2f}x the Comm API over tcp |")
print(f"| Comm API, 64 MiB tensors (recv_into), tcp loopback | | | | {api_g64_tcp:.2f} GB/s | reference for unix |")
print(f"| Comm API, 64 MiB tensors (recv_into), unix socket | | | | {api_g64_unix:.2f} GB/s | "
      f"{api_g64_unix/api_g64_tcp:.2f}x tcp |")
print(f"| wcomm bench ping (64 B, V0.1 control protocol) | {b50:.1f} us | {b99:.1f} us | | | p50 {b50/raw50:.2f}x raw |")
print(f"| iperf3, one TCP stream | | | {iperf:.2f} GB/s | {iperf:.2f} GB/s | reference |")
print(f"| raw TCP, blocking writes/reads of whole message-size buffers | | | {raw1:.2f} GB/s | {raw64:.2f} GB/s | reference |")
print(f"| wcomm bench upload | | | {g1:.2f} GB/s | {g64:.2f} GB/s | {g1/iperf:.2f}x / {g64/iperf:.2f}x iperf3; "
      f"{g1/raw1:.2f}x / {g64/raw64:.2f}x raw bulk |")
print(f"| peak RSS growth, recv of a 200 MiB tensor | | | | | {rss_mib:.0f} MiB = {rss:.2f}x payload (ideal 1.00x) |")
print(f"| peak RSS growth, recv_into a touched 200 MiB tensor | | | | | {rssi_mib:.0f} MiB = {rssi:.2f}x payload (ideal 0.00x) |")
print(f"\np50 of each turn, us: raw {raw_all}; Comm API {api_all}; Comm API without busy polling {sleep_all}")
PY
