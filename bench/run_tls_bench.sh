#!/usr/bin/env bash
# TLS goodput on loopback, beside its references in the same run: wcomm's 64 MiB goodput over
# TLS (api_goodput tls) against wcomm over plain TCP (api_goodput tcp; target >= 0.7x) and
# against plain OpenSSL moving the same messages with the same cipher, TLS 1.3 AES-128-GCM
# (tls_bulk_reference; target >= 0.9x); raw TCP (raw_tcp_bulk) for scale. The programs take
# turns, TRIALS times, so that a drift of the machine reaches all alike; each ratio is the
# median of the turns' ratios. Usage: bench/run_tls_bench.sh [build-dir]
# Environment: TRIALS (default 5), COUNT (64 MiB messages per trial, default 16).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="$(cd "${1:-$root/build}" && pwd)"
trials="${TRIALS:-5}"
count="${COUNT:-16}"
bytes=$((64 << 20))
python=/usr/bin/python3
for b in api_goodput tls_bulk_reference raw_tcp_bulk; do
  [ -x "$build/bench/$b" ] || { echo "run_tls_bench: build it first: cmake --build $build --target api_goodput" \
    "tls_bulk_reference raw_tcp_bulk" >&2; exit 1; }
done
work="$(mktemp -d /tmp/wcomm-tls-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
bash "$root/scripts/make-test-certs.sh" "$work/certs" echo ping
export WCOMM_BENCH_TLS_DIR="$work/certs"
gb() { "$python" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["goodput_gb_s"])'; }
: >"$work/figures"
for t in $(seq "$trials"); do
  tls=$("$build/bench/api_goodput" "$bytes" "$count" tls | gb)
  # recv_into posted ahead of the sender's 4 in flight, as the reference reads into a buffer
  # that is always ready: no message lands in fresh storage to be copied over.
  tls_ahead=$("$build/bench/api_goodput" "$bytes" "$count" tls 5 | gb)
  tcp=$("$build/bench/api_goodput" "$bytes" "$count" tcp | gb)
  ref=$("$build/bench/tls_bulk_reference" "$work/certs" "$bytes" "$count" | gb)
  raw=$("$build/bench/raw_tcp_bulk" "$bytes" "$count" | gb)
  echo "$tls $tcp $ref $raw $tls_ahead" >>"$work/figures"
  echo "run_tls_bench: turn $t: wcomm tls $tls (posted ahead $tls_ahead), wcomm tcp $tcp, openssl $ref, raw tcp $raw GB/s" >&2
done
"$python" - "$work/figures" "$(cat /proc/loadavg)" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
med = lambda xs: statistics.median(xs)
tls, tcp, ref, raw, tls_ahead = (med([r[i] for r in rows]) for i in range(5))
print("| figure (64 MiB messages, GB/s, median of %d turns) | value |" % len(rows))
print("|---|---|")
print("| wcomm over TLS (AES-128-GCM) | %.3f |" % tls)
print("| wcomm over TLS, recv_into posted 5 ahead | %.3f |" % tls_ahead)
print("| wcomm over plain TCP | %.3f |" % tcp)
print("| plain OpenSSL TLS 1.3 reference (same cipher) | %.3f |" % ref)
print("| raw TCP | %.3f |" % raw)
print("| TLS / plain TCP (target >= 0.7) | %.2f |" % med([r[0] / r[1] for r in rows]))
print("| TLS / OpenSSL reference (target >= 0.9) | %.2f |" % med([r[0] / r[2] for r in rows]))
print("| TLS, posted ahead / OpenSSL reference (like for like) | %.2f |" % med([r[4] / r[2] for r in rows]))
print("| OpenSSL reference / plain TCP (the ceiling of the 0.7 target) | %.2f |" % med([r[2] / r[1] for r in rows]))
print("load average at the end: %s" % sys.argv[2])
PY
