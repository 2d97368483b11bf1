#!/usr/bin/env bash
# The main job: builds wcomm and runs a real two-node exchange on this machine, first two
# Comms in one program (examples/p2p_local.cpp), then two `wcomm node` processes (echo + send).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh build >/dev/null
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
