#!/usr/bin/env bash
# scripts/test.sh quick: a check of a change in minutes (docs/testing.md): a Release build of
# the unit and integration tests and the Python extension, the unit tests and the integration
# suite's core (ctest -L 'unit|quick'), and the Python tests but the slow ones.
#
# scripts/test.sh: runs every test (what .ci/run runs): the C++ suites (ctest), the Python suite (pytest, when present), then the
# same C++ suites under AddressSanitizer + UndefinedBehaviorSanitizer and under
# ThreadSanitizer, then a short libFuzzer pass (scripts/fuzz.sh, from the ASan build). Installs
# what it needs.
# WCOMM_SKIP_SANITIZERS=1 skips the sanitizer passes. WCOMM_LONG_TESTS=1 also fuzzes long
# (at least 10^7 inputs). WCOMM_LONG_TESTS=1 makes the codec fuzz
# long (400000 mutated frames from a fresh seed, printed; WCOMM_FUZZ_SEED=N replays one) and
# the receive-path ping-pong a soak (100000 round trips), and runs the sessions soak (16 peers
# in 4 processes with restarts) for 10 minutes instead of 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
# Batched (unity) compilation: a fresh clone's builds take about half the CPU time.
export WCOMM_UNITY_BUILD=${WCOMM_UNITY_BUILD:-ON}
# Each phase is announced with the time since the start, to see where CI time goes.
phase() { echo "== $* (at ${SECONDS} s)"; }

# The packages: the test profile for the quick run; the full run adds the cluster tests' sshd,
# Slurm and Open MPI and the sanitizers' clang (scripts/bootstrap.sh).
if [ "${1:-}" = quick ]; then bash scripts/bootstrap.sh test; else bash scripts/bootstrap.sh full; fi

if [ "${1:-}" = quick ]; then
  phase "build (Release): unit and integration tests, the Python extension"
  bash scripts/build.sh build "" wcomm_unit_tests wcomm_apps_unit_tests wcomm_integration_tests wcomm_python_core wcomm_cli
  phase "ctest -L 'unit|quick'"
  (cd build && ctest --output-on-failure -j2 --timeout 120 -L 'unit|quick')
  phase "pytest (quick: not the cluster launchers, the mesh deadlock hunt, V0.1's command lines)"
  bash scripts/install-python.sh build
  ignore=()
  for slow in cluster_ssh cluster_batch mesh_deadlock v01_dropin node_cli group_launchers v01_benchmark; do
    ignore+=("--ignore=tests/python/test_$slow.py")
  done
  /usr/bin/python3 -m pytest -q tests/python "${ignore[@]}"
  phase "done"
  exit 0
fi

phase "build (Release)"
bash scripts/build.sh build
phase "ctest"
(cd build && ctest --output-on-failure -j2 --timeout 300)
if [ "${WCOMM_LONG_TESTS:-0}" = 1 ]; then
  phase "sessions soak (10 min)"
  WCOMM_SOAK_SECONDS=600 build/tests/wcomm_integration_tests --gtest_filter='CommSoak.Sixteen*'
fi

if [ -d tests/python ] && ls tests/python/test_*.py >/dev/null 2>&1; then
  phase "pytest"
  bash scripts/install-python.sh build
  set +e
  /usr/bin/python3 -m pytest -q tests/python
  rc=$?
  set -e
  [ $rc -eq 0 ] || [ $rc -eq 5 ] || exit $rc
fi

phase "Python package (sdist, wheel from it, a fresh venv)"
bash scripts/check-wheel.sh

# The optional features off (docs/cpp-api.md): the library still builds and its tests pass,
# and using a missing feature fails naming its option and package. Unoptimised, with
# assertions on (build type None): a check of behaviour, not speed; its build takes 0.6x of a
# Release one's time (178-225 s against 297 s here), its tests 29-33 s against 22.
phase "build without the optional features (UCX, zstd, TLS, ZeroMQ)"
WCOMM_BUILD_TYPE=None WCOMM_UNITY_BUILD=ON WCOMM_CMAKE_ARGS="-DWCOMM_WITH_UCX=OFF -DWCOMM_WITH_ZSTD=OFF -DWCOMM_WITH_TLS=OFF \
  -DWCOMM_WITH_ZMQ=OFF -DWCOMM_EXAMPLES=OFF -DWCOMM_BENCHMARKS=OFF" \
  bash scripts/build.sh build-minimal "" wcomm_unit_tests wcomm_apps_unit_tests wcomm_integration_tests \
  wcomm_transfer_tests wcomm_mesh_tests
phase "ctest without them: unit, quick, transfer, mesh, the features' own"
(cd build-minimal && ctest --output-on-failure -j2 --timeout 300 -L 'unit|quick|transfer|mesh' &&
   ctest --output-on-failure -j2 --timeout 300 -R 'OptionalFeatures|CommChunking|CommCompression')

if [ "${WCOMM_SKIP_SANITIZERS:-0}" != 1 ]; then
  # clang, with the libFuzzer targets: the fuzz pass below runs from this same build.
  phase "build (ASan + UBSan, clang)"
  bash scripts/build.sh build-asan fuzz wcomm_unit_tests wcomm_integration_tests wcomm_collectives_tests wcomm_cli \
    wcomm_transfer_tests xfer_cache wcomm_mesh_tests wcomm_cluster_tests wcomm_apps_unit_tests wcomm_apps_integration_tests \
    wcomm_wifi_cell_tests
  phase "ctest under ASan + UBSan"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
     ctest --output-on-failure -j2 --timeout 600)
  phase "build (TSan, clang)"
  bash scripts/build.sh build-tsan thread wcomm_unit_tests wcomm_integration_tests wcomm_collectives_tests wcomm_cli \
    wcomm_transfer_tests xfer_cache wcomm_mesh_tests wcomm_cluster_tests wcomm_apps_unit_tests wcomm_apps_integration_tests \
    wcomm_wifi_cell_tests
  phase "ctest under TSan"
  supp="$PWD/tests/tsan.supp"  # third-party code only, each with the reason
  # UCX_MEM_EVENTS=no: UCX's memory hooks (libucm) intercept madvise in exiting threads, after
  # TSan has let go of them, and crash the transfer tests; wcomm needs no UCX memory events.
  (cd build-tsan && UCX_MEM_EVENTS=no TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$supp" \
     ctest --output-on-failure -j2 --timeout 900)
fi

# libFuzzer (docs/testing.md, "Fuzzing"): about a minute, or at least 10^7 inputs when long.
phase "fuzz"
if [ "${WCOMM_LONG_TESTS:-0}" = 1 ]; then bash scripts/fuzz.sh long; else bash scripts/fuzz.sh short; fi
