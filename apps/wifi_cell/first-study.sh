#!/usr/bin/env bash
# The first figures on the emulated cell (docs/wifi.md), each phase with the emulator's lag over
# it: ping idle and under an iperf3 upload, iperf3 TCP goodput, then per configuration `wcomm
# bench`: upload goodput (1 MiB and 64 MiB messages) and 64 B round trips alone, then while
# 64 MiB tensors saturate the same Comm connection. Runs inside scripts/wifi-cell.sh, station 1
# to the host behind the access point:
#   CLI=build/wcomm OUT=/tmp/study scripts/wifi-cell.sh --width 40 --mcs 7 -- bash apps/wifi_cell/first-study.sh
# Environment: CHUNKS (node-a's chunk sizes to run, "default" = its comm.chunk_bytes; default
# "default 0"), EXTRA_COMM (more of node-a's comm settings, e.g. ", tcp_notsent_lowat_bytes:
# 16384"), TARGETS (node-a's comm.tcp_target_queue_delay_us values to run, each with every
# chunk size; "default" = the Comm's default, which is the default), LOAD_S (seconds of
# tensor load, default 10), OUT (where the reports go), CLI.
set -eu
sta=$WIFI_CELL_STA_NS_1 host=$WIFI_CELL_AP_NS addr=$WIFI_CELL_AP_ADDR out=${OUT:-.} cli=${CLI:-build/wcomm}
mkdir -p "$out"
source "$(dirname "$0")/study-common.sh"  # mark, lag
pings() { python3 -c 'import re,sys
t=sorted(float(m) for m in re.findall(r"time=([0-9.]+) ms", open(sys.argv[1]).read()))
q=lambda p: t[min(len(t)-1, int(p*len(t)))]
print("%s: %d replies, p50 %.2f ms, p99 %.2f ms" % (sys.argv[2], len(t), q(0.5), q(0.99)))' "$1" "$2"; }

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
m=$(mark); timeout 30 ip netns exec "$sta" ping -c 300 -i 0.02 "$addr" > "$out/ping-idle.txt"; pings "$out/ping-idle.txt" "ping idle"; lag "$m"

timeout 5 ip netns exec "$host" iperf3 -s -1 -D
sleep 0.5
m=$(mark)
timeout 30 ip netns exec "$sta" ping -c 450 -i 0.02 "$addr" > "$out/ping-load.txt" &
timeout 30 ip netns exec "$sta" iperf3 -c "$addr" -t 10 -J > "$out/iperf3.json"
wait
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("iperf3 TCP upload: %.1f Mbit/s received, %d retransmits" % (r["end"]["sum_received"]["bits_per_second"]/1e6, r["end"]["sum_sent"].get("retransmits",0)))' "$out/iperf3.json"
pings "$out/ping-load.txt" "ping under iperf3 upload"; lag "$m"

cat > "$out/b.yaml" <<YAML
local: {node_id: node-b, host: $addr, port: 47211}
peers: [{node_id: node-a, host: $WIFI_CELL_STA_ADDR_1, port: 1}]
comm: {heartbeat_interval_s: 0}
YAML
for target in ${TARGETS:-default}; do
for chunk in ${CHUNKS:-default 0}; do
  target_comm=""; [ "$target" = default ] || target_comm=", tcp_target_queue_delay_us: $target"
  cat > "$out/a.yaml" <<YAML
local: {node_id: node-a, host: $WIFI_CELL_STA_ADDR_1, port: 0}
peers: [{node_id: node-b, host: $addr, port: 47211}]
comm: {heartbeat_interval_s: 0${target_comm}${EXTRA_COMM:-}}
YAML
  chunk_arg=(); [ "$chunk" = default ] || chunk_arg=(--chunk-bytes "$chunk")
  m=$(mark)
  timeout 90 ip netns exec "$host" "$cli" bench --config "$out/b.yaml" responder --peer node-a --wait-timeout 30 --quiet &
  sleep 1
  timeout 90 ip netns exec "$sta" "$cli" bench --config "$out/a.yaml" initiator --peer node-b --quiet \
    --latency-sizes 64 --latency-rounds 200 --warmup-rounds 10 --throughput-sizes 1048576,67108864 \
    --throughput-target-bytes 134217728 --throughput-trials 1 --directions upload --ping-count 1 \
    --load-fractions 1.0 --load-directions upload --load-backgrounds tensor --load-tensor-bytes 67108864 \
    --load-duration ${LOAD_S:-10} --load-probe-interval 0.05 "${chunk_arg[@]}" --operation-timeout 60 \
    --output "$out/bench-$target-$chunk.json"
  wait
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1])); u=r["latency"][0]["summary_ms"]; l=r["latency_under_load"][0]
tp=r["throughput"]["upload"]
print("wcomm bench (target %s, chunk %s): goodput %s Mbit/s; 64 B alone p50 %.2f p99 %.2f ms; under 64 MiB tensors (%.1f Mbit/s) p50 %.2f p99 %.2f ms from schedule, closed-loop p50 %.2f p99 %.2f ms, %d probes; ratio p99 %.1fx" % (sys.argv[2], sys.argv[3], " / ".join("%d B %.1f" % (t["payload_bytes_per_message"], t["aggregate_goodput_mbps"]["p50"]) for t in tp), u["p50"], u["p99"], l["delivered_mbps"], l["rtt_from_schedule_ms"]["p50"], l["rtt_from_schedule_ms"]["p99"], l["rtt_ms"]["p50"], l["rtt_ms"]["p99"], l["rtt_ms"]["sample_count"], l["rtt_from_schedule_ms"]["p99"]/u["p99"]))' "$out/bench-$target-$chunk.json" "$target" "$chunk"
  lag "$m"
done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
