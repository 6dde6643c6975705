#!/usr/bin/env bash
# The host memory a CPU run holds against what its tensors use: the process's own floor
# (`ztrain --version`'s resident high-water mark), then a GPT-2 of 12 thin blocks (C=64, T=32)
# at micro-batch 32 on one rank without and with full activation checkpointing, through
# bench/host_cache (each step's in-use and reserved peaks, the cache's kept blocks by size class,
# the resident set).
#   bench/host_memory.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 12, "n_head": 4, "n_embd": 64, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"threads": 1, "val_interval": 0}, "train_micro_batch_size_per_gpu": 32}
JSON
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%F)"
/usr/bin/python3 -c "import resource, subprocess, sys
subprocess.run([sys.argv[1], '--version'], stdout=subprocess.DEVNULL, check=True)
print(f'ztrain --version: resident high-water {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.1f} MiB')" "$build/ztrain"
for mode in none full; do
  echo "--- activation checkpointing: $mode"
  if [ $mode = full ]; then "$build/bench/host_cache" "$dir/c.json" 3 --set 'activation_checkpointing={}'
  else "$build/bench/host_cache" "$dir/c.json" 3; fi
done
