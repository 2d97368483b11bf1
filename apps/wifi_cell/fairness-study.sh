#!/usr/bin/env bash
# Flows sharing the cell at once (docs/wifi.md, "Flows sharing the cell"): per-flow goodput and
# Jain's index for iperf3 (one TCP stream per flow), wcomm (wireless_comm) and V0.1's design
# (asyncio TCP, length-prefixed frames; apps/wifi_cell/fairness_flows.py), each for DURATION
# seconds with the emulator's lag over each phase, in two patterns: every station uploading to
# the host behind the access point, and that host sending to every station at once (fan-out).
# Runs inside scripts/wifi-cell.sh:
#   OUT=/tmp/fair scripts/wifi-cell.sh --stations 3 --width 40 --mcs 7 -- bash apps/wifi_cell/fairness-study.sh
# Fan-out also runs wcomm's own `wcomm bench fanout` (C++) with the egress scheduler off and on.
# Environment: DURATION (default 10), OUT (where the results go), PY (default /usr/bin/python3),
# PATTERNS (default "upload fanout"), CLI (default build/wcomm), DESIGNS (default "wcomm v01"),
# WCOMM_FLOWS_COMM (more CommConfig fields for the wcomm design, a JSON object).
# Writes OUT/flows.json (every run: flows, sum, Jain, the emulator's lag) and, with `wcomm report`,
# OUT/flows.html and OUT/flows-svg/.
set -eu
n=$WIFI_CELL_STATIONS host=$WIFI_CELL_AP_NS addr=$WIFI_CELL_AP_ADDR out=${OUT:-.} py=${PY:-/usr/bin/python3}
d=${DURATION:-10} here=$(cd "$(dirname "$0")" && pwd) cli=${CLI:-build/wcomm}
mkdir -p "$out"
source "$(dirname "$0")/study-common.sh"  # mark, lag, lag_json
# record DESIGN PATTERN MARK FILE...: the flows' Mbit/s from the sinks' JSON lines (in station
# order), their sum, Jain's index and the emulator's lag since MARK, printed and added to the
# runs that flows.json gathers at the end
record() { local design=$1 pattern=$2 since=$3; shift 3
  python3 - "$design" "$pattern" "$(lag_json "$since")" "$@" <<'PY' | tee -a "$out/flows-runs.jsonl"
import json, sys
design, pattern, lag, files = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4:]
x = [v for f in files for v in json.load(open(f))["flows_mbps"].values()]
r = {"design": design, "pattern": pattern, "flow_mbps": x, "sum_mbps": round(sum(x), 2),
     "jain": round(sum(x) ** 2 / (len(x) * sum(v * v for v in x)), 4) if any(x) else 0, "lag": lag}
print(json.dumps(r))
PY
  lag "$since"
}
sta_ns() { v=WIFI_CELL_STA_NS_$1; echo "${!v}"; }
sta_addr() { v=WIFI_CELL_STA_ADDR_$1; echo "${!v}"; }
stations=$(for i in $(seq 1 "$n"); do printf '%s,' "$(sta_addr "$i")"; done); stations=${stations%,}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $n stations, $d s a phase"
: > "$out/flows-runs.jsonl"

for pattern in ${PATTERNS:-upload fanout}; do
  # iperf3: one stream per flow, all at once
  m=$(mark)
  for i in $(seq 1 "$n"); do
    if [ "$pattern" = upload ]; then server_ns=$host client_ns=$(sta_ns "$i") to=$addr
    else server_ns=$(sta_ns "$i") client_ns=$host to=$(sta_addr "$i"); fi
    timeout $((d + 20)) ip netns exec "$server_ns" iperf3 -s -1 -p $((5200 + i)) -J > "$out/iperf3-$pattern-$i.json" &
  done
  sleep 0.5
  for i in $(seq 1 "$n"); do
    if [ "$pattern" = upload ]; then client_ns=$(sta_ns "$i") to=$addr; else client_ns=$host to=$(sta_addr "$i"); fi
    timeout $((d + 20)) ip netns exec "$client_ns" iperf3 -c "$to" -p $((5200 + i)) -t "$d" > /dev/null &
  done
  wait
  python3 - "$out" "$pattern" "$n" > "$out/flows-iperf3-$pattern.json" <<'PY'
import json, sys
out, pattern, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = {str(i): round(json.load(open(f"{out}/iperf3-{pattern}-{i}.json"))["end"]["sum_received"]["bits_per_second"] / 1e6, 2)
     for i in range(1, n + 1)}
print(json.dumps({"flows_mbps": x}))
PY
  record iperf3 "$pattern" "$m" "$out/flows-iperf3-$pattern.json"

  for design in ${DESIGNS:-wcomm v01}; do
    m=$(mark)
    start=$(python3 -c "import time; print(time.time() + 3)")
    common=(--design "$design" --port 47300 --start "$start" --duration "$d")
    sinks=()
    if [ "$pattern" = upload ]; then
      timeout $((d + 40)) ip netns exec "$host" "$py" "$here/fairness_flows.py" sink "${common[@]}" --local "$addr" \
        --peers "$stations" > "$out/flows-$design-$pattern-host.json" &
      sinks+=("$out/flows-$design-$pattern-host.json")
      sleep 0.5
      for i in $(seq 1 "$n"); do
        timeout $((d + 40)) ip netns exec "$(sta_ns "$i")" "$py" "$here/fairness_flows.py" source "${common[@]}" \
          --local "$(sta_addr "$i")" --peers "$addr" &
      done
    else
      for i in $(seq 1 "$n"); do
        timeout $((d + 40)) ip netns exec "$(sta_ns "$i")" "$py" "$here/fairness_flows.py" sink "${common[@]}" \
          --local "$(sta_addr "$i")" --peers "$addr" > "$out/flows-$design-$pattern-$i.json" &
        sinks+=("$out/flows-$design-$pattern-$i.json")
      done
      sleep 0.5
      timeout $((d + 40)) ip netns exec "$host" "$py" "$here/fairness_flows.py" source "${common[@]}" --local "$addr" \
        --peers "$stations" &
    fi
    wait
    record "$design" "$pattern" "$m" "${sinks[@]}"
  done
  [ "$pattern" = fanout ] || continue
  # wcomm's own fan-out benchmark (C++: `wcomm bench fanout` / `sink`), egress scheduler off and on
  for scheduler in off on; do
    m=$(mark)
    extra=""; [ "$scheduler" = on ] && extra=", egress_quantum_bytes: 65536"
    peers=""; ids=()
    for i in $(seq 1 "$n"); do
      peers+="{node_id: sta$i, host: $(sta_addr "$i"), port: 47400}, "; ids+=("sta$i")
      cat > "$out/sink-$i.yaml" <<YAML
local: {node_id: sta$i, host: $(sta_addr "$i"), port: 47400}
peers: [{node_id: host, host: $addr, port: 47400}]
comm: {heartbeat_interval_s: 0}
YAML
      timeout $((d + 40)) ip netns exec "$(sta_ns "$i")" "$cli" bench --config "$out/sink-$i.yaml" sink --peer host \
        --wait-timeout 30 --quiet &
    done
    cat > "$out/fanout.yaml" <<YAML
local: {node_id: host, host: $addr, port: 47400}
peers: [${peers%, }]
comm: {heartbeat_interval_s: 0$extra}
YAML
    sleep 1
    timeout $((d + 40)) ip netns exec "$host" "$cli" bench --config "$out/fanout.yaml" fanout --peers "${ids[@]}" \
      --duration "$d" --quiet --output "$out/bench-fanout-$scheduler.json"
    wait
    python3 - "$out/bench-fanout-$scheduler.json" > "$out/flows-bench-fanout-$scheduler.json" <<'PY'
import json, sys
print(json.dumps({"flows_mbps": {p["peer"]: round(p["goodput_mbps"], 2) for p in json.load(open(sys.argv[1]))["per_peer"]}}))
PY
    record "wcomm bench fanout, scheduler $scheduler" "$pattern" "$m" "$out/flows-bench-fanout-$scheduler.json"
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# Every run in one report, and its page (`wcomm report`: per pattern, the flows per design as a plot)
python3 - "$out/flows-runs.jsonl" "$n" "$d" "${WIFI_CELL_ARGS:-}" > "$out/flows.json" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(json.dumps({"scenario": "flows", "stations": int(sys.argv[2]), "duration_s": float(sys.argv[3]),
                  "cell": sys.argv[4], "runs": runs}, indent=1))
PY
if [ -x "$cli" ]; then "$cli" report "$out/flows.json" -o "$out/flows.html" --svg-dir "$out/flows-svg"; fi
