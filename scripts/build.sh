#!/usr/bin/env bash
# Configures and builds wcomm. Usage: scripts/build.sh [BUILD_DIR] [SANITIZERS] [TARGET...]
#   scripts/build.sh                      # build/ (Release), every target
#   scripts/build.sh build-asan address,undefined wcomm_unit_tests
#   scripts/build.sh build-asan fuzz wcomm_unit_tests fuzz_manifest   # clang: ASan + UBSan +
#                                                                      # the libFuzzer targets
# WCOMM_BOOTSTRAP: the packages' profile (scripts/bootstrap.sh; default test, full for a
# sanitizer build); WCOMM_CMAKE_ARGS: more configure arguments (-DBUILD_TESTING=OFF, say).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
sanitize=${2:-}
if [ -n "$sanitize" ]; then bash scripts/bootstrap.sh full; else bash scripts/bootstrap.sh "${WCOMM_BOOTSTRAP:-test}"; fi
shift $(( $# < 2 ? $# : 2 ))
targets=()
for t in "$@"; do targets+=(--target "$t"); done
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Release by default (no -g: half the compile time on two cores); WCOMM_BUILD_TYPE overrides.
# Sanitizer builds use -O1: fast enough to run the suites, quicker to compile.
flags=(-DCMAKE_BUILD_TYPE="${WCOMM_BUILD_TYPE:-Release}" -DBUILD_TESTING=ON -DWCOMM_EXAMPLES=ON -DWCOMM_BENCHMARKS=ON)
# WCOMM_UNITY_BUILD=ON compiles a target's sources in batches (about half the compile time of
# a fresh build: scripts/test.sh uses it); OFF (the default) rebuilds less after an edit.
flags+=(-DCMAKE_UNITY_BUILD="${WCOMM_UNITY_BUILD:-OFF}")
[ -n "$sanitize" ] && flags+=(-DCMAKE_CXX_FLAGS_RELEASE="-O1")
# Sanitizer builds use clang: it compiles instrumented code in about 0.6x of gcc's time, and
# libFuzzer is clang's. "fuzz" is ASan + UBSan plus the libFuzzer targets, so the test suites
# and the fuzzers share one instrumented build.
compiler=${CXX:-}
[ -n "$sanitize" ] && compiler=clang++-16
if [ "$sanitize" = fuzz ]; then
  sanitize=address,undefined
  flags+=(-DWCOMM_FUZZ=ON)
fi
[ -n "$compiler" ] && flags+=(-DCMAKE_CXX_COMPILER="$compiler")
# A build directory keeps its compiler (CMake forgets the other settings when it changes): one
# configured with another compiler is started afresh.
cached=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
if [ -n "$cached" ] && [ "$(basename "$cached")" != "$(basename "${compiler:-c++}")" ]; then
  rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
fi
# shellcheck disable=SC2086  # WCOMM_CMAKE_ARGS: words
cmake -S . -B "$dir" "${generator[@]}" "${flags[@]}" -DWCOMM_SANITIZE="$sanitize" ${WCOMM_CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j "${WCOMM_JOBS:-2}" "${targets[@]}"
