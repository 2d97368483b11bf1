#!/usr/bin/env bash
# Responsiveness under load on emulated links (issue "Wi-Fi that stays responsive under
# load"), each figure beside its reference from the same run:
#  1. head-of-line blocking: 64 B round trip p99 over one Comm connection while 64 MiB tensors
#     saturate it (`wcomm bench initiator --load-backgrounds tensor`), chunking on and off,
#     against the unloaded 64 B p99 of the same run; link: veth + tbf 150 Mbit/s both ways.
#  2. fan-out fairness: one node sending to four peers at once through one tbf-shaped
#     150 Mbit/s uplink (a bridge in a namespace behind it), `wcomm bench fanout`: Jain's index
#     and aggregate goodput with the egress scheduler on and off.
#  3. compression: goodput of sparse (7/8 zeros) and random tensors over a 20 Mbit/s tbf link
#     with compression auto and off (bench/compression_goodput.py).
# Needs root (ip netns, tc). Usage: bench/run_wifi_bench.sh [build-dir]. Environment:
# PARTS (default "hol fanout compression"), LOAD_S (seconds of load per HOL run, default 8),
# FANOUT_S (default 8). Namespaces and interfaces are named wcw*<pid>; all are removed on exit.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="$(cd "${1:-$root/build}" && pwd)"
cli="$build/wcomm"
python=/usr/bin/python3
parts="${PARTS:-hol fanout compression}"
load_s="${LOAD_S:-8}"
fanout_s="${FANOUT_S:-8}"
[ -x "$cli" ] || { echo "run_wifi_bench: build wcomm_cli first" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "run_wifi_bench: needs root (ip netns, tc)" >&2; exit 1; }

id=$$
work="$(mktemp -d /tmp/wcomm-wifi-bench.XXXXXX)"
namespaces=()
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
say() { echo "run_wifi_bench: $*" >&2; }
newns() { ip netns add "$1"; namespaces+=("$1"); ip -n "$1" link set lo up; }

# Two namespaces joined by a veth pair, 192.0.2.1 <-> 192.0.2.2, shaped both ways.
pair() {  # pair <rate> -> sets A, B
  A="wcwa$id"; B="wcwb$id"
  for ns in "$A" "$B"; do ip netns del "$ns" 2>/dev/null || true; done
  newns "$A"; newns "$B"
  ip link add "wcwa$id" netns "$A" type veth peer name "wcwb$id" netns "$B"
  ip -n "$A" addr add 192.0.2.1/24 dev "wcwa$id"
  ip -n "$B" addr add 192.0.2.2/24 dev "wcwb$id"
  ip -n "$A" link set "wcwa$id" up
  ip -n "$B" link set "wcwb$id" up
  ip netns exec "$A" tc qdisc add dev "wcwa$id" root tbf rate "$1" burst 32kbit latency 50ms
  ip netns exec "$B" tc qdisc add dev "wcwb$id" root tbf rate "$1" burst 32kbit latency 50ms
}
unpair() { ip netns del "$A"; ip netns del "$B"; }

p99() { "$python" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2] % eval(sys.argv[3]))' "$@"; }

# ---- 1. head-of-line blocking ------------------------------------------------------------
hol() {
  pair 150mbit
  cat > "$work/b.yaml" <<YAML
local: {node_id: node-b, host: 192.0.2.2, port: 47111}
peers: [{node_id: node-a, host: 192.0.2.1, port: 1}]
comm: {heartbeat_interval_s: 0}
YAML
  # name / chunk_bytes / extra comm settings of node-a. "paced": the egress scheduler holds
  # the node to 17 MB/s (just under the link's ~18 MB/s of payload), so the shaper's queue
  # stays short, and smaller chunks and kernel queue.
  local configs="${HOL_CONFIGS:-chunked:262144: unchunked:0: paced:65536:,tcp_notsent_lowat_bytes:16384,egress_quantum_bytes:16384,egress_rate_bytes_per_second:17000000}"
  for config in $configs; do
    local name="${config%%:*}" rest="${config#*:}"
    local chunk="${rest%%:*}" extra="${rest#*:}"
    extra="${extra//:/: }"
    cat > "$work/a.yaml" <<YAML
local: {node_id: node-a, host: 192.0.2.1, port: 0}
peers: [{node_id: node-b, host: 192.0.2.2, port: 47111}]
comm: {heartbeat_interval_s: 0${extra}}
YAML
    ip netns exec "$B" "$cli" bench --config "$work/b.yaml" responder --peer node-a --wait-timeout 60 --quiet &
    local responder=$!
    sleep 0.5
    ip netns exec "$A" "$cli" bench --config "$work/a.yaml" initiator --peer node-b --quiet \
      --latency-sizes 64 --latency-rounds 200 --warmup-rounds 10 --throughput-sizes 1048576 \
      --throughput-target-bytes 16777216 --throughput-trials 1 --directions upload --ping-count 1 \
      --load-fractions 1.0 --load-directions upload --load-backgrounds tensor --load-tensor-bytes 67108864 \
      --load-duration "$load_s" --load-probe-interval 0.02 --chunk-bytes "$chunk" --operation-timeout 120 \
      --output "$work/hol-$name.json"
    wait "$responder"
    local unloaded loaded closed samples goodput
    unloaded=$(p99 "$work/hol-$name.json" '%.3f' 'r["latency"][0]["summary_ms"]["p99"] if "summary_ms" in r["latency"][0] else r["latency"][0]["rtt_ms"]["p99"]')
    loaded=$(p99 "$work/hol-$name.json" '%.3f' 'r["latency_under_load"][0]["rtt_from_schedule_ms"]["p99"]')
    closed=$(p99 "$work/hol-$name.json" '%.3f' 'r["latency_under_load"][0]["rtt_ms"]["p99"]')
    samples=$(p99 "$work/hol-$name.json" '%d' 'r["latency_under_load"][0]["rtt_ms"]["sample_count"]')
    goodput=$(p99 "$work/hol-$name.json" '%.1f' 'r["latency_under_load"][0]["delivered_mbps"]')
    echo "| HOL $name (chunk_bytes=$chunk$extra) | unloaded 64 B p99 $unloaded ms | loaded p99 $loaded ms from schedule ($closed ms closed-loop, $samples probes) | ratio $("$python" -c "print(round($loaded/$unloaded,1))") | tensor load $goodput Mbit/s |"
  done
  unpair
}

# ---- 2. fan-out fairness -----------------------------------------------------------------
fanout() {
  # hub --(veth, tbf 150 Mbit/s)-- switch namespace with a bridge -- four leaves.
  local H="wcwh$id" S="wcws$id"
  newns "$H"; newns "$S"
  ip netns exec "$S" ip link add "wcwbr$id" type bridge
  ip -n "$S" link set "wcwbr$id" up
  ip link add "wcwh$id" netns "$H" type veth peer name "wcwhs$id" netns "$S"
  ip -n "$H" addr add 192.0.2.10/24 dev "wcwh$id"
  ip -n "$H" link set "wcwh$id" up
  ip -n "$S" link set "wcwhs$id" master "wcwbr$id" up
  ip netns exec "$H" tc qdisc add dev "wcwh$id" root tbf rate 150mbit burst 32kbit latency 50ms
  local peers_yaml="" leaves=""
  for i in 1 2 3 4; do
    local L="wcwl$i$id"
    newns "$L"
    ip link add "wcwl$i$id" netns "$L" type veth peer name "wcwls$i$id" netns "$S"
    ip -n "$L" addr add "192.0.2.$((10 + i))/24" dev "wcwl$i$id"
    ip -n "$L" link set "wcwl$i$id" up
    ip -n "$S" link set "wcwls$i$id" master "wcwbr$id" up
    peers_yaml+="{node_id: leaf-$i, host: 192.0.2.$((10 + i)), port: 47120}, "
    leaves+="leaf-$i,"
    cat > "$work/leaf-$i.yaml" <<YAML
local: {node_id: leaf-$i, host: 192.0.2.$((10 + i)), port: 47120}
peers: [{node_id: hub, host: 192.0.2.10, port: 47120}]
comm: {heartbeat_interval_s: 0}
YAML
  done
  for mode in on off; do
    local comm="heartbeat_interval_s: 0"
    [ "$mode" = on ] && comm+=", egress_quantum_bytes: 65536"
    cat > "$work/hub.yaml" <<YAML
local: {node_id: hub, host: 192.0.2.10, port: 47120}
peers: [${peers_yaml%, }]
comm: {$comm}
YAML
    local sinks=()
    for i in 1 2 3 4; do
      ip netns exec "wcwl$i$id" "$cli" bench sink --config "$work/leaf-$i.yaml" --peer hub --wait-timeout 60 --quiet &
      sinks+=($!)
    done
    sleep 0.5
    ip netns exec "$H" "$cli" bench fanout --config "$work/hub.yaml" --peers "${leaves%,}" --duration "$fanout_s" \
      --message-bytes 1048576 --output "$work/fanout-$mode.json"
    for pid in "${sinks[@]}"; do wait "$pid"; done
    echo "| fan-out x4, scheduler $mode | Jain $(p99 "$work/fanout-$mode.json" '%.3f' 'r["jain_index"]') | aggregate $(p99 "$work/fanout-$mode.json" '%.1f' 'r["aggregate_goodput_mbps"]') Mbit/s | per peer $(p99 "$work/fanout-$mode.json" '%s' '" / ".join("%.1f" % p["goodput_mbps"] for p in r["per_peer"])') |"
  done
}

# ---- 3. compression ----------------------------------------------------------------------
compression() {
  pair 20mbit
  export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
  for pattern in sparse random; do
    for mode in off auto; do
      ip netns exec "$B" "$python" "$here/compression_goodput.py" recv --local 192.0.2.2:47130 --peer 192.0.2.1:47130 &
      local receiver=$!
      sleep 0.5
      ip netns exec "$A" "$python" "$here/compression_goodput.py" send --local 192.0.2.1:47130 \
        --peer 192.0.2.2:47130 --pattern "$pattern" --compression "$mode" --bytes 4194304 --count 4 \
        > "$work/zstd-$pattern-$mode.json"
      wait "$receiver"
      echo "| 20 Mbit/s, $pattern, compression $mode | $("$python" -c 'import json,sys; r=json.loads(open(sys.argv[1]).readlines()[-1]); print("%.2f Mbit/s | %.1f s for %d MiB | zstd in %d B, out %d B, %.3f s" % (r["goodput_mbps"], r["elapsed_s"], r["bytes"] >> 20, r["compression_bytes_in"], r["compression_bytes_out"], r["compression_seconds"]))' "$work/zstd-$pattern-$mode.json") |"
    done
  done
  unpair
}

echo "| scenario | figure | reference | ... |"
echo "|---|---|---|---|"
for part in $parts; do "$part"; done
