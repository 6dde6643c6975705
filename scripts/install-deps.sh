#!/usr/bin/env bash
# Installs everything ztrain's tests and benchmarks use on Debian (as root, or through sudo): what
# the main job uses (scripts/install-main-deps.sh, called first with the CUDA build's headers, and
# given this list's packages so that apt runs once), then the references the tests compare with,
# the tools they drive, and their data files. Idempotent: packages already present are left alone,
# and apt is not touched at all when nothing is missing.
set -euo pipefail

# Beyond install-main-deps.sh's build and runtime packages:
packages=(
  doctest-dev cmake                               # the unit tests (header-only); meson finds doctest through CMake, as doctest-dev has no .pc
  gfortran python3-numpy                          # the embedding API's Fortran and Python examples (tests/api/)
  python3-matplotlib                              # ztrain bench --plot's drawing (bench/bench_plot.py)
  iproute2 util-linux                             # network namespaces: the multi-host launch test
  libblis-openmp-dev                              # the CPU GEMM's alternative (-Dblas=blis)
  python3-torch libopenblas0-pthread              # the PyTorch reference the tests compare with
  python3-venv                                    # the benchmarks' peers (scripts/install-peers.sh)
  fio                                             # the I/O yardstick for the offload benchmarks
  strace                                          # tests/test_launch.sh's one-write-per-error-line check
  clang libclang-rt-14-dev llvm                   # the sanitizer and libFuzzer build (scripts/fuzz.sh)
)
"$(dirname "$0")"/install-main-deps.sh --cuda "${packages[@]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# Python's safetensors reads the exports back in the tests (tests/ref/check_export.py), and
# transformers (with gguf and accelerate, which it needs for GGUF files) is the Llama family's
# reference (tests/ref/llama_hf.py, gguf_ref.py). Debian 12 packages none of them, so they come
# from PyPI into the system Python the tests use; transformers 4.46 still runs on Debian's torch
# 1.13, which spares the tests PyPI's 5 GB torch, and numpy stays below 2 for that torch.
# PEFT is LoRA's reference (tests/ref/lora_peft.py); 0.13.2 is the last to run on that torch and
# transformers, and needs nothing they lack. TensorBoard's own reader (EventAccumulator, in the
# tensorboard package) reads the event files of ztrain's `tensorboard` monitor back in its tests.
# Jinja2 renders the models' chat templates in transformers' apply_chat_template, the chat
# templates' reference (tests/ref/tokenizer_ref.py chat).
if ! /usr/bin/python3 -c "import safetensors, transformers, gguf, accelerate, peft, tensorboard, jinja2
assert transformers.__version__ == '4.46.3' and peft.__version__ == '0.13.2'
assert tensorboard.__version__ == '2.19.0' and jinja2.__version__ == '3.1.6'" 2>/dev/null; then
  echo "install-deps: installing safetensors, transformers, gguf, accelerate, peft, tensorboard and jinja2 (pip)"
  $sudo /usr/bin/python3 -m pip install -q --break-system-packages safetensors "transformers==4.46.3" "gguf==0.17.1" \
    "tensorboard==2.19.0" "jinja2==3.1.6" "numpy<2"
  $sudo /usr/bin/python3 -m pip install -q --break-system-packages --no-deps "accelerate==1.1.1" "peft==0.13.2"
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
