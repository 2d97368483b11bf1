#!/usr/bin/env bash
# Every station uploading to the host behind the access point at once (docs/wifi.md, "Stations
# uploading at once"): per-station goodput and Jain's index for iperf3 (one TCP stream per
# station), wcomm (wireless_comm) and V0.1's design (asyncio TCP, length-prefixed frames), in
# that order, each for DURATION seconds, with the emulator's lag over each phase. Runs inside
# scripts/wifi-cell.sh:
#   OUT=/tmp/fair scripts/wifi-cell.sh --stations 3 --width 40 --mcs 7 -- bash apps/wifi_cell/fairness-study.sh
# Environment: DURATION (default 10), OUT (where the results go), PY (default /usr/bin/python3).
set -eu
n=$WIFI_CELL_STATIONS host=$WIFI_CELL_AP_NS addr=$WIFI_CELL_AP_ADDR out=${OUT:-.} py=${PY:-/usr/bin/python3}
d=${DURATION:-10} here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
mark() { wc -l < "$WIFI_CELL_LOG"; }
lag() { tail -n +"$1" "$WIFI_CELL_LOG" | python3 -c 'import json,sys
w=[json.loads(l) for l in sys.stdin if "\"lag\"" in l]
print("  lag over %d windows: mean %.3f ms, worst window mean %.3f ms, cpu %.0f%%" % (len(w), sum(x["mean_ms"] for x in w)/max(1,len(w)), max([x["mean_ms"] for x in w] or [0]), 100*sum(x["cpu"] for x in w)/max(1,len(w))))'; }
stations=$(for i in $(seq 1 "$n"); do v=WIFI_CELL_STA_ADDR_$i; printf '%s,' "${!v}"; done); stations=${stations%,}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $n stations uploading to $addr for $d s"

# iperf3: one server per station on the host, all clients at once
m=$(mark)
for i in $(seq 1 "$n"); do timeout $((d + 20)) ip netns exec "$host" iperf3 -s -1 -p $((5200 + i)) > /dev/null & done
sleep 0.5
for i in $(seq 1 "$n"); do
  ns=WIFI_CELL_STA_NS_$i
  timeout $((d + 20)) ip netns exec "${!ns}" iperf3 -c "$addr" -p $((5200 + i)) -t "$d" -J > "$out/iperf3-$i.json" &
done
wait
python3 - "$out" "$n" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
x = [json.load(open(f"{out}/iperf3-{i}.json"))["end"]["sum_received"]["bits_per_second"] / 1e6 for i in range(1, n + 1)]
r = {"design": "iperf3", "station_mbps": [round(v, 2) for v in x], "sum_mbps": round(sum(x), 2),
     "jain": round(sum(x) ** 2 / (n * sum(v * v for v in x)), 4)}
print(json.dumps(r)); open(f"{out}/fair-iperf3.json", "w").write(json.dumps(r))
PY
lag "$m"

for design in wcomm v01; do
  m=$(mark)
  start=$(python3 -c "import time; print(time.time() + 3)")
  common=(--design "$design" --host "$addr" --port 47300 --start "$start" --duration "$d")
  timeout $((d + 40)) ip netns exec "$host" "$py" "$here/upload_fairness.py" sink "${common[@]}" --stations "$stations" \
    > "$out/fair-$design.json" &
  sink=$!
  sleep 0.5
  for i in $(seq 1 "$n"); do
    ns=WIFI_CELL_STA_NS_$i a=WIFI_CELL_STA_ADDR_$i
    timeout $((d + 40)) ip netns exec "${!ns}" "$py" "$here/upload_fairness.py" source "${common[@]}" --index "$i" --local "${!a}" &
  done
  wait
  cat "$out/fair-$design.json"
  lag "$m"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
