#!/usr/bin/env bash
# The peers the CPU benchmarks measure ztrain against, in a virtual environment outside the clone
# (PyPI's torch brings ~5 GB of CUDA libraries, so it is installed once per machine and reused):
# PyTorch 2.x (MKL; FSDP2's fully_shard), DeepSpeed (ZeRO-3 on gloo with DS_ACCELERATOR=cpu) and
# transformers (the Llama-family step a user would run: bench/torch_llama_step.py), and matplotlib
# for bench/simulate_paper.py's plot.
# Prints the environment's python on its last line. ZTRAIN_PEERS overrides where it lives.
set -euo pipefail
venv=${ZTRAIN_PEERS:-$HOME/.cache/ztrain-peers}
torch_version=2.15.0
deepspeed_version=0.19.8
transformers_version=5.25.0
if ! "$venv/bin/python" -c "import torch, deepspeed, transformers, matplotlib; assert torch.__version__.startswith('$torch_version')
assert transformers.__version__ == '$transformers_version'" >/dev/null 2>&1; then
  /usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null ||
    { echo "install-peers: Python's venv module is missing: run scripts/install-deps.sh (python3-venv)" >&2; exit 1; }
  echo "install-peers: installing torch $torch_version, deepspeed $deepspeed_version and transformers" \
    "$transformers_version into $venv (pip)" >&2
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "torch==$torch_version" numpy
  # DeepSpeed's sdist imports torch while it builds; its ops are built just in time, and none are
  # needed on CPU ranks, so nothing is compiled here.
  DS_BUILD_OPS=0 "$venv/bin/pip" install -q --no-build-isolation "deepspeed==$deepspeed_version"
  "$venv/bin/pip" install -q "transformers==$transformers_version" matplotlib
fi
echo "$venv/bin/python"
