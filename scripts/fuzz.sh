#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in build-asan/ (the clang ASan + UBSan build
# that scripts/test.sh also runs the test suites in) and runs each from its seed corpus
# (fuzz/corpus/, made from the golden frames). Usage: scripts/fuzz.sh [short|long]
#   short (default): SECONDS_EACH (15) seconds per target, about a minute in all;
#   long: at least 10^7 executions in all (4.5 million each for the header and manifest
#         decoders, 500 000 each for the handshake and whole-connection targets).
# A crash, leak or timeout fails the run and leaves the input in build-asan/artifacts/
# (docs/testing.md says how to replay it).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-short}
dir=build-asan
targets=(frame_header manifest handshake connection)
bash scripts/build.sh "$dir" fuzz $(printf -- 'fuzz_%s ' "${targets[@]}")
mkdir -p "$dir/artifacts"
for t in "${targets[@]}"; do
  work="$dir/corpus/$t"  # what the fuzzer finds goes here; the seeds stay as committed
  mkdir -p "$work"
  limit=(-max_total_time="${SECONDS_EACH:-15}")
  if [ "$mode" = long ]; then
    case $t in frame_header|manifest) limit=(-runs=4500000) ;; *) limit=(-runs=500000) ;; esac
  fi
  echo "== fuzz_$t (${limit[*]})"
  set +e
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$dir/fuzz/fuzz_$t" "${limit[@]}" -timeout=20 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/${t}-" "$work" "fuzz/corpus/$t" >"$dir/fuzz_$t.log" 2>&1
  rc=$?
  set -e
  grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|SUMMARY|Test unit written)" "$dir/fuzz_$t.log" || true
  [ $rc -eq 0 ] || { tail -40 "$dir/fuzz_$t.log"; echo "fuzz_$t failed (exit $rc): the input is in $dir/artifacts/" >&2; exit 1; }
done
