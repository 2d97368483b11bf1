#!/usr/bin/env bash
# The main job: builds wcomm and runs a real two-node exchange on this machine, first two
# Comms in one program (examples/p2p_local.cpp), then two `wcomm node` processes (echo + send).
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the example needs: the run profile's packages (scripts/bootstrap.sh), the library,
# the `wcomm` command and the example, with the build's own progress lines.
echo "== build (Release): the library, the wcomm command, examples/p2p_local (at ${SECONDS} s)"
WCOMM_BOOTSTRAP=run WCOMM_UNITY_BUILD=${WCOMM_UNITY_BUILD:-ON} \
  WCOMM_CMAKE_ARGS="-DBUILD_TESTING=OFF -DWCOMM_BENCHMARKS=OFF ${WCOMM_CMAKE_ARGS:-}" \
  bash scripts/build.sh build "" p2p_local wcomm_cli
echo "== built (at ${SECONDS} s)"
echo "== examples/p2p_local"
build/examples/p2p_local
echo
echo "== two processes: wcomm node echo (node-b) and send --expect-reply (node-a)"
build/wcomm node --config configs/local-node-b.yaml echo --src node-a --tag 1 --count 1 --timeout 20 &
echo_pid=$!
trap 'kill $echo_pid 2>/dev/null || true' EXIT
build/wcomm node --config configs/local-node-a.yaml send --dst node-b --tag 1 --timeout 20 \
  --json '{"message":"hello"}' --metadata '{"trace_id":"local-test-1"}' --expect-reply
wait $echo_pid
trap - EXIT
