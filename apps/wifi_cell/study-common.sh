# Sourced by the study scripts in this folder (they run inside scripts/wifi-cell.sh): whether
# the emulator kept real time over each phase, from its log ($WIFI_CELL_LOG).
#   m=$(mark); ...the phase...; lag "$m"
mark() { wc -l < "$WIFI_CELL_LOG"; }
# lag <first line>: the 1 s windows since that line of the log: their mean lag, the worst
# window's mean, the largest single lag, and the emulator's CPU share.
lag() { tail -n +"$1" "$WIFI_CELL_LOG" | python3 -c 'import json,sys
w=[json.loads(l) for l in sys.stdin if "\"lag\"" in l]
print("  lag over %d windows: mean %.3f ms, worst window mean %.3f ms, max %.2f ms, cpu %.0f%%" % (len(w), sum(x["mean_ms"] for x in w)/max(1,len(w)), max([x["mean_ms"] for x in w] or [0]), max([x["max_ms"] for x in w] or [0]), 100*sum(x["cpu"] for x in w)/max(1,len(w))))'; }
