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
  libopenblas-pthread-dev libblis-openmp-dev      # the CPU GEMM (-Dblas=openblas, the default, or blis)
  python3 python3-torch libopenblas0-pthread      # the PyTorch reference the tests compare with
  python3-pip                                     # safetensors (below), which Debian does not package
  python3-venv                                    # the benchmarks' peers (scripts/install-peers.sh)
  fio                                             # the I/O yardstick for the offload benchmarks
  clang libclang-rt-14-dev llvm                   # the sanitizer and libFuzzer build (scripts/fuzz.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python's safetensors reads the exports back in the tests (tests/ref/check_export.py). Debian 12
# has no package for it, so it comes from PyPI into the system Python the tests use.
if ! /usr/bin/python3 -c "import safetensors" 2>/dev/null; then
  echo "install-deps: installing safetensors (pip)"
  $sudo /usr/bin/python3 -m pip install -q --break-system-packages safetensors
fi

# DeepSpeed's own memory estimators check `ztrain estimate`'s DeepSpeed column
# (tests/ref/deepspeed_estimate.py, which takes the functions from the source). Its PyPI package is
# an sdist that needs a CUDA-era torch to install, so the sdist itself (2 MB) is kept where
# tests/meson.build looks for it.
deepspeed_sdist=/usr/local/share/ztrain/deepspeed-0.19.8.tar.gz
if [ ! -s "$deepspeed_sdist" ]; then
  echo "install-deps: downloading DeepSpeed's sdist to $deepspeed_sdist (pip)"
  $sudo mkdir -p "$(dirname "$deepspeed_sdist")"
  $sudo /usr/bin/python3 -m pip download -q --no-deps --no-binary :all: -d "$(dirname "$deepspeed_sdist")" deepspeed==0.19.8
fi
