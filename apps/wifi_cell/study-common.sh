# Sourced by the study scripts in this folder (they run inside scripts/wifi-cell.sh): whether
# the emulator kept real time over each phase, from its log ($WIFI_CELL_LOG).
#   m=$(mark); ...the phase...; lag "$m"
mark() { wc -l < "$WIFI_CELL_LOG"; }
# lag_json <first line>: the 1 s windows since that line of the log, as one JSON object: how
# many, their mean lag (mean_ms), the worst window's mean, the largest single lag, and the
# emulator's CPU share.
lag_json() { tail -n +"$1" "$WIFI_CELL_LOG" | python3 -c 'import json,sys
w=[json.loads(l) for l in sys.stdin if "\"lag\"" in l]
n=max(1,len(w))
print(json.dumps({"windows": len(w), "mean_ms": round(sum(x["mean_ms"] for x in w)/n, 4),
  "worst_window_ms": max([x["mean_ms"] for x in w] or [0]), "max_ms": max([x["max_ms"] for x in w] or [0]),
  "cpu": round(sum(x["cpu"] for x in w)/n, 3)}))'; }
# lag <first line>: the same, as a line for people.
lag() { lag_json "$1" | python3 -c 'import json,sys
l=json.load(sys.stdin)
print("  lag over %d windows: mean %.3f ms, worst window mean %.3f ms, max %.2f ms, cpu %.0f%%" % (l["windows"],
  l["mean_ms"], l["worst_window_ms"], l["max_ms"], 100*l["cpu"]))'; }
