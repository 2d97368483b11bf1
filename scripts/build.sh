#!/usr/bin/env bash
# Configures and builds wcomm. Usage: scripts/build.sh [BUILD_DIR] [SANITIZERS] [TARGET...]
#   scripts/build.sh                      # build/ (RelWithDebInfo), every target
#   scripts/build.sh build-asan address,undefined wcomm_unit_tests
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
dir=${1:-build}
sanitize=${2:-}
shift $(( $# < 2 ? $# : 2 ))
targets=()
for t in "$@"; do targets+=(--target "$t"); done
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWCOMM_SANITIZE="$sanitize" >/dev/null
cmake --build "$dir" -j "${WCOMM_JOBS:-2}" "${targets[@]}"
