#!/usr/bin/env bash
# A model whose model states do not fit in this machine's memory trains a few steps: GPT-2 shape
# with n_layer 24, n_embd 2560 (2.02B parameters: 16 bytes a parameter is 32 GB of model states)
# at np 2, ZeRO stage 3, bf16, with the optimizer states and the parameter shards on NVMe
# (offload_optimizer and offload_param, device nvme, no host cache). Reports each rank's peak
# resident memory (GNU time's maximum RSS), the accounted peaks by category, and seconds per step.
# Not a CI test: it writes ~28 GB of swap files and takes minutes.
#   bench/big_model.sh [build-dir] [steps] [nvme-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-3}
nvme=${3:-${TMPDIR:-/tmp}}
dir=$(mktemp -d)
swap=$(mktemp -d "$nvme/ztrain_big_model.XXXXXX")
trap 'rm -rf "$dir" "$swap"' EXIT
launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

/usr/bin/python3 bench/random_tokens.py "$dir/bench_train_000.bin" 65536  # the timing does not depend on the text
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 24, "n_head": 20, "n_embd": 2560, "vocab_size": 50257, "padded_vocab_size": 50304,
           "max_seq_len": 1024},
 "data": {"format": "llmc", "train": "$dir/bench_train_*.bin", "seq_len": 64},
 "train": {"steps": $steps, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 1, "steps_per_print": 1, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1e8, "stage3_max_live_parameters": 3e8,
                       "reduce_bucket_size": 1e8, "sub_group_size": 1e7,
                       "offload_optimizer": {"device": "nvme", "nvme_path": "$swap", "buffer_count": 4,
                                             "pipeline_read": true, "pipeline_write": true},
                       "offload_param": {"device": "nvme", "nvme_path": "$swap", "buffer_count": 2,
                                         "max_in_cpu": 0}}}
JSON

echo "== $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "== nvme_path $swap on $(df -T "$swap" | awk 'NR==2 {print $1 " (" $2 "), " $5 " free"}')"
"$build/ztrain" estimate --config "$dir/c.json" --world-size 2 | sed -n '1,2p;5,9p'
start=$(date +%s)
"${launch[@]}" -np 2 /usr/bin/time -f "rank max RSS %M KiB, %e s wall" "$build/ztrain" train --config "$dir/c.json" \
  --metrics "$dir/m.jsonl" 2>&1 | tee "$dir/out" | grep -E "^step|offloaded|max RSS|error"
echo "== whole run $(($(date +%s) - start)) s (initialisation writes the states once)"

/usr/bin/python3 - "$dir" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
m = [json.loads(l) for l in open(os.path.join(d, "m.jsonl"))]
GiB = 1 << 30
peak = m[-1]["peak_bytes"]
print("seconds per step: " + ", ".join(f"{x['ms'] / 1e3:.1f}" for x in m) +
      (f" (median after the first {statistics.median(x['ms'] for x in m[1:]) / 1e3:.1f})" if len(m) > 1 else ""))
print("accounted peaks per rank (last step): " +
      ", ".join(f"{k} {v / GiB:.2f} GiB" for k, v in peak.items()))
rss = [int(l.split("max RSS ")[1].split()[0]) for l in open(os.path.join(d, "out")) if "max RSS" in l]
params = 24 * 12 * 2560 * 2560 + 24 * 13 * 2560 + 50304 * 2560 + 1024 * 2560 + 2 * 2560
print(f"model: {params / 1e9:.2f}B parameters, model states at 16 bytes a parameter {16 * params / 1e9:.1f} GB; "
      f"peak RSS per rank: " + ", ".join(f"{r / (1 << 20):.2f} GiB" for r in rss))
PY
