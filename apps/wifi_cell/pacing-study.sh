#!/usr/bin/env bash
# How far pacing alone keeps the access point's queue short (docs/wifi.md, issue 30 item 4):
# ping p50 / p99 from station 1 to the AP host idle, then beside 8 s iperf3 TCP uploads paced by
# the kernel at several rates (`--fq-rate`: SO_MAX_PACING_RATE, which TCP's internal pacing
# honours without the fq qdisc this kernel lacks). Runs inside scripts/wifi-cell.sh:
#   scripts/wifi-cell.sh --width 40 --mcs 7 -- bash apps/wifi_cell/pacing-study.sh
# RATES (default "0 125M 118M 110M 100M"; 0: unpaced), OUT (default a temporary folder).
set -u
AP=$WIFI_CELL_AP_NS; STA=$WIFI_CELL_STA_NS_1; ADDR=$WIFI_CELL_AP_ADDR
OUT=${OUT:-$(mktemp -d)}
RATES=${RATES:-0 125M 118M 110M 100M}
pct() { sort -n | awk '{a[NR]=$1} END {printf "p50 %.2f p99 %.2f n %d\n", a[int(NR*0.5)+1], a[int(NR*0.99)+1], NR}'; }
pings() { ip netns exec "$STA" ping -i 0.02 -c "$1" "$ADDR" | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | pct; }
echo "idle: $(pings 200)"
for rate in $RATES; do
  ip netns exec "$AP" iperf3 -s -D -1 >/dev/null 2>&1
  sleep 0.3
  extra=()
  [ "$rate" != 0 ] && extra=(--fq-rate "$rate")
  ip netns exec "$STA" iperf3 -c "$ADDR" -t 8 "${extra[@]}" -J > "$OUT/iperf-$rate.json" 2>&1 &
  sleep 2
  p=$(pings 250)
  wait
  mbps=$(/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.1f' % (d['end']['sum_received']['bits_per_second'] / 1e6))" "$OUT/iperf-$rate.json" 2>/dev/null)
  echo "iperf3 fq-rate=$rate: $mbps Mbit/s; ping under it: $p"
done
