#!/usr/bin/env bash
# V0.1's command lines over the emulated cell (docs/wifi.md, "V0.1's command lines over the
# cell"), station 1 to the host behind the access point: `python -m wireless_comm.node` (echo
# there, send from the station with a reply expected: JSON with a piggypayload, and a 64 MiB
# float32 tensor), `python -m wireless_comm.benchmark` (V0.1's options: latency, upload
# goodput, 25 / 100 % background load) and `python -m wireless_comm.multirank` (one rank on each
# side). These are the wireless_comm package's drop-ins, run as V0.1's users run V0.1. Runs
# inside scripts/wifi-cell.sh:
#   OUT=/tmp/v01 scripts/wifi-cell.sh --width 40 --mcs 7 -- bash apps/wifi_cell/v01-commands.sh
# Environment: OUT, PY (default /usr/bin/python3; the installed wireless_comm is used).
set -eu
sta=$WIFI_CELL_STA_NS_1 host=$WIFI_CELL_AP_NS addr=$WIFI_CELL_AP_ADDR sta_addr=$WIFI_CELL_STA_ADDR_1
out=$(mkdir -p "${OUT:-.}" && cd "${OUT:-.}" && pwd) py=${PY:-/usr/bin/python3}
cat > "$out/host.yaml" <<YAML
local: {node_id: node-b, host: $addr, port: 47211}
peers: [{node_id: node-a, host: $sta_addr, port: 47212}]
YAML
cat > "$out/sta.yaml" <<YAML
local: {node_id: node-a, host: $sta_addr, port: 47212}
peers: [{node_id: node-b, host: $addr, port: 47211}]
YAML
on_host() { ip netns exec "$host" "$py" "$@"; }
on_sta() { ip netns exec "$sta" "$py" "$@"; }

echo "== python -m wireless_comm.node"
timeout 120 ip netns exec "$host" "$py" -m wireless_comm.node --config "$out/host.yaml" echo --src node-a --count 0 > "$out/echo.txt" 2>&1 &
echo_pid=$!
sleep 1
timeout 60 ip netns exec "$sta" "$py" -m wireless_comm.node --config "$out/sta.yaml" send --dst node-b \
  --json '{"step": 1, "loss": 0.25}' --metadata '{"from": "station-1"}' --expect-reply --timeout 30
start=$(date +%s.%N)
timeout 90 ip netns exec "$sta" "$py" -m wireless_comm.node --config "$out/sta.yaml" send --dst node-b \
  --tensor-shape 16,1024,1024 --expect-reply --timeout 60 > "$out/tensor-reply.txt"
python3 -c "import sys; print('64 MiB float32 tensor there and back: %.1f s; reply: %s' % (float(sys.argv[2]) - float(sys.argv[1]), open(sys.argv[3]).read().strip()[:120]))" \
  "$start" "$(date +%s.%N)" "$out/tensor-reply.txt"
kill "$echo_pid"; wait "$echo_pid" || true  # (serving until stopped, as V0.1's echo does)

echo "== python -m wireless_comm.benchmark"
timeout 200 ip netns exec "$host" "$py" -m wireless_comm.benchmark --config "$out/host.yaml" responder --peer node-a \
  --quiet > /dev/null 2>&1 &
bench_pid=$!
sleep 1
timeout 200 ip netns exec "$sta" "$py" -m wireless_comm.benchmark --config "$out/sta.yaml" initiator --peer node-b --quiet \
  --latency-sizes 64,65536 --latency-rounds 100 --warmup-rounds 5 --throughput-sizes 1048576 \
  --throughput-target-bytes 33554432 --throughput-trials 1 --directions upload --ping-count 3 \
  --load-fractions 0.25,1.0 --load-directions upload --load-concurrencies 1 --load-duration 5 \
  --output "$out/benchmark.json"
wait "$bench_pid"
python3 - "$out/benchmark.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for l in r["latency"]:
    print("latency %d B: p50 %.2f p99 %.2f ms" % (l["payload_bytes"], l["summary_ms"]["p50"], l["summary_ms"]["p99"]))
for t in r["throughput"]["upload"]:
    print("upload %d B messages: %.1f Mbit/s" % (t["payload_bytes_per_message"], t["aggregate_goodput_mbps"]["p50"]))
for l in r["latency_under_load"]:
    print("under %.0f %% load: 64 B p50 %.2f p99 %.2f ms" % (100 * l["load_fraction"], l["rtt_ms"]["p50"], l["rtt_ms"]["p99"]))
PY

echo "== python -m wireless_comm.multirank"
timeout 200 ip netns exec "$host" "$py" -m wireless_comm.multirank --local-host "$addr" --remote-host "$sta_addr" \
  --ranks-per-host 1 --base-port 29100 --quiet responder > "$out/multirank-responder.json" &
mr_pid=$!
timeout 200 ip netns exec "$sta" "$py" -m wireless_comm.multirank --local-host "$sta_addr" --remote-host "$addr" \
  --ranks-per-host 1 --base-port 29100 --quiet --output "$out/multirank.json" initiator \
  --payload-sizes 1048576 --rounds 5 --warmup-rounds 1 --collectives broadcast,allgather,ring_allreduce
wait "$mr_pid"
python3 - "$out/multirank.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for name, sizes in r["collective_summary"].items():
    for size, s in sizes.items():
        c = s["collective_completion_ms"]
        print("multirank %s %s B: p50 %.1f ms, p99 %.1f ms" % (name, size, c["p50"], c["p99"]))
PY
