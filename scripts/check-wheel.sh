#!/usr/bin/env bash
# The Python package as a user gets it: python3 -m build --no-isolation makes the sdist and,
# from it in a temporary directory, the wheel; the wheel goes into a fresh venv on Debian's
# interpreter (--system-site-packages: numpy, torch), and is used from outside the repository:
# two Comms exchange a message, and the bundled `wcomm` runs. Nothing else from here is used.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh test
work=$(mktemp -d /tmp/wcomm-wheel-XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "check-wheel: building the sdist and the wheel (CMake, Release) in $work" >&2
if ! WCOMM_CMAKE_ARGS="${WCOMM_CMAKE_ARGS:--DCMAKE_UNITY_BUILD=ON}" /usr/bin/python3 -P -m build --no-isolation \
    --outdir "$work/dist" . >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log"
  exit 1
fi
ls "$work"/dist/wireless_comm-*.tar.gz "$work"/dist/wireless_comm-*.whl
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
# (--ignore-installed: a copy installed for the system interpreter is visible in this venv)
"$work/venv/bin/pip" install --quiet --no-index --no-deps --ignore-installed "$work"/dist/wireless_comm-*.whl
cd "$work"
"$work/venv/bin/python" - <<'PY'
import asyncio, os, socket, subprocess, sys, wireless_comm
from wireless_comm import Comm, CommOptions, Peer

assert wireless_comm.__file__.startswith(sys.prefix), f"imported from {wireless_comm.__file__}, not the venv"

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

async def main():
    pa, pb = Peer("node-a", "127.0.0.1", free_port()), Peer("node-b", "127.0.0.1", free_port())
    a = await Comm.create(local=pa, peers=[pb], bind_host="127.0.0.1")
    b = await Comm.create(local=pb, peers=[pa], bind_host="127.0.0.1")
    await a.send({"hello": [1, 2, 3]}, a.peer("node-b"), piggypayload={"id": 7}, options=CommOptions(tag=3))
    value, meta = await b.recv(b.peer("node-a"), CommOptions(tag=3))
    assert value == {"hello": [1, 2, 3]} and meta == {"id": 7}, (value, meta)
    await a.close()
    await b.close()

asyncio.run(main())
cli = os.path.join(os.path.dirname(wireless_comm.__file__), "_bin", "wcomm")
subprocess.run([cli, "--help"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("check-wheel: wireless_comm", wireless_comm.__version__, "from", wireless_comm.__file__, "works")
PY
