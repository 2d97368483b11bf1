#!/usr/bin/env bash
# Installs every Debian package wcomm builds, tests or benchmarks with. Idempotent: when all
# packages are present it returns at once without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libasio-dev libmsgpack-cxx-dev libboost-dev libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libfmt-dev libssl-dev libucx-dev ucx-utils
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-pybind11 python3-dev python3-pytest python3-numpy python3-torch libdlpack-dev
  python3-zmq python3-msgpack python3-yaml python3-pip python3-setuptools
  libzmq3-dev cppzmq-dev libzstd-dev
  iperf3 iproute2 iputils-ping procps openssl
  openmpi-bin
  clang-16 libclang-rt-16-dev  # clang 16: _Float16 on x86 (14 lacks it)
  openssh-server openssh-client slurmctld slurmd slurm-client munge
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bootstrap: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
