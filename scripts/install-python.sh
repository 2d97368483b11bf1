#!/usr/bin/env bash
# Installs the wireless_comm Python package for Debian's /usr/bin/python3, offline.
# Usage: scripts/install-python.sh [BUILD_DIR]   (the CMake build to take the extension from;
# default build/, configured and built as needed).
#
# pip builds python/ without build isolation (Debian's setuptools, nothing downloaded) and
# installs only this package, no dependencies, into /usr/local. --break-system-packages is
# needed because Debian marks its interpreter as externally managed (PEP 668); nothing that
# apt installed is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh run
build=$(realpath -m "${1:-build}")
WCOMM_BUILD_DIR="$build" /usr/bin/python3 -m pip install --quiet --no-build-isolation --no-deps --no-index \
  --break-system-packages --root-user-action=ignore .
# Import it from outside the source tree, so that the installed copy is the one checked.
(cd / && /usr/bin/python3 -c "import wireless_comm, wireless_comm._core; print('installed wireless_comm', wireless_comm.__version__, 'from', wireless_comm.__path__[0])")
