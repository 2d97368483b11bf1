#!/usr/bin/env bash
# Latency under background load on the emulated cell (docs/wifi.md, "Latency under load"):
# `wcomm bench` from station 1 to the host behind the access point, 64 B probes over the Comm
# connection while a background takes 25 / 50 / 75 / 100 % of the measured capacity (V0.1's
# --load-fractions): plain TCP streams beside the Comm (V0.1's background) and 64 MiB tensors
# over the probes' own connection (wcomm's), once with wcomm's defaults and once with chunking
# off (`--chunk-bytes 0`: whole frames, as V0.1 writes them). Runs inside scripts/wifi-cell.sh:
#   CLI=build/wcomm OUT=/tmp/load scripts/wifi-cell.sh --width 40 --mcs 7 -- bash apps/wifi_cell/load-study.sh
# Each configuration's report is also rendered as an HTML page with its plots (load-*.html).
# Environment: CLI, OUT, FRACTIONS (default "0.25 0.5 0.75 1.0"), LOAD_S (default 8),
# CHUNKS (default "default 0").
set -eu
sta=$WIFI_CELL_STA_NS_1 host=$WIFI_CELL_AP_NS addr=$WIFI_CELL_AP_ADDR out=${OUT:-.} cli=${CLI:-build/wcomm}
mkdir -p "$out"
source "$(dirname "$0")/study-common.sh"  # mark, lag
cat > "$out/b.yaml" <<YAML
local: {node_id: node-b, host: $addr, port: 47211}
peers: [{node_id: node-a, host: $WIFI_CELL_STA_ADDR_1, port: 1}]
comm: {heartbeat_interval_s: 0}
YAML
cat > "$out/a.yaml" <<YAML
local: {node_id: node-a, host: $WIFI_CELL_STA_ADDR_1, port: 0}
peers: [{node_id: node-b, host: $addr, port: 47211}]
comm: {heartbeat_interval_s: 0}
YAML
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
fractions=$(echo ${FRACTIONS:-0.25 0.5 0.75 1.0} | tr ' ' ,)
for chunk in ${CHUNKS:-default 0}; do
  chunk_arg=(); [ "$chunk" = default ] || chunk_arg=(--chunk-bytes "$chunk")
  m=$(mark)
  timeout 400 ip netns exec "$host" "$cli" bench --config "$out/b.yaml" responder --peer node-a --wait-timeout 60 --quiet &
  sleep 1
  timeout 400 ip netns exec "$sta" "$cli" bench --config "$out/a.yaml" initiator --peer node-b --quiet \
    --latency-sizes 64 --latency-rounds 200 --warmup-rounds 10 --throughput-sizes 1048576 \
    --throughput-target-bytes 67108864 --throughput-trials 1 --directions upload --ping-count 1 \
    --load-fractions "$fractions" --load-directions upload --load-concurrencies 1 --load-backgrounds tcp,tensor \
    --load-tensor-bytes 67108864 --load-duration "${LOAD_S:-8}" --load-probe-interval 0.05 "${chunk_arg[@]}" \
    --operation-timeout 60 --output "$out/load-$chunk.json"
  wait
  # The report's page: round trips by background and fraction plotted against the load delivered
  "$cli" report --quiet "$out/load-$chunk.json" -o "$out/load-$chunk.html"
  python3 - "$out/load-$chunk.json" "$chunk" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
u = r["latency"][0]["summary_ms"]
print("chunk %s: 64 B alone p50 %.2f p99 %.2f ms" % (sys.argv[2], u["p50"], u["p99"]))
for l in r["latency_under_load"]:
    s, c = l["rtt_from_schedule_ms"], l["rtt_ms"]
    print("  %-6s %4.0f %%: %.1f Mbit/s; p50 %.1f p99 %.1f ms from schedule; closed-loop p50 %.1f p99 %.1f ms; p99 %.0fx alone"
          % (l.get("background", "?"), 100 * l.get("load_fraction", 0), l.get("delivered_mbps", 0), s["p50"], s["p99"], c["p50"], c["p99"], s["p99"] / u["p99"]))
PY
  lag "$m"
done
