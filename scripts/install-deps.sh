#!/usr/bin/env bash
# Installs what ztrain needs on Debian (as root, or through sudo). Idempotent: packages already
# present are left alone, and apt is not touched at all when nothing is missing.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config
  libeigen3-dev nlohmann-json3-dev doctest-dev   # header-only: kernels, config, tests
  libopenmpi-dev openmpi-bin                      # MpiCommunicator, mpirun
  iproute2 util-linux                             # network namespaces: the multi-host launch test
  liburing-dev                                    # the io_uring offload engine
  python3 python3-torch libopenblas0-pthread      # the PyTorch reference the tests compare with
  fio                                             # the I/O yardstick for the offload benchmarks
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
