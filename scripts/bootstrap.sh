#!/usr/bin/env bash
# Installs the Debian packages wcomm needs, by profile (each includes the ones before it):
#   run   building the libraries, the `wcomm` command, the examples and the Python extension
#         (scripts/run-example.sh, pip install .)
#   test  + the test and benchmark tools (scripts/test.sh quick), ns-3 for the emulated Wi-Fi cell
#   full  + what only the cluster tests (sshd, Slurm, munge, Open MPI) and the sanitizer passes
#         (clang 16) need (scripts/test.sh, .ci/run); the default
# Idempotent: when all packages are present it returns at once without touching apt.
set -euo pipefail
profile=${1:-full}

run=(
  build-essential cmake ninja-build pkg-config
  libasio-dev libmsgpack-cxx-dev libboost-dev libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libfmt-dev libssl-dev libucx-dev libzmq3-dev cppzmq-dev libzstd-dev
  pybind11-dev python3-pybind11 python3-dev python3-setuptools python3-pip python3-venv libdlpack-dev
)
test=(
  libgtest-dev libgmock-dev libbenchmark-dev ucx-utils
  python3-pytest python3-numpy python3-torch python3-zmq python3-msgpack python3-yaml python3-build
  iperf3 iproute2 iputils-ping procps openssl
  libns3-dev libgsl-dev  # ns-3 for build/wcomm-wifi-cell (docs/wifi.md); its ns3-*.pc files name libgsl.so
)
full=(
  openmpi-bin
  clang-16 libclang-rt-16-dev  # clang 16: _Float16 on x86 (14 lacks it)
  openssh-server openssh-client slurmctld slurmd slurm-client munge
)
case "$profile" in
  run) packages=("${run[@]}") ;;
  test) packages=("${run[@]}" "${test[@]}") ;;
  full) packages=("${run[@]}" "${test[@]}" "${full[@]}") ;;
  *) echo "bootstrap: unknown profile '$profile' (run, test or full)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bootstrap ($profile): installing ${#missing[@]} packages: ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap ($profile): done" >&2
