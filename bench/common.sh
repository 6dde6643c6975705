# Sourced by the benchmark scripts that measure training steps: the one preamble they share.
# Sets $build (the first argument, default build), a scratch folder $dir removed on exit with a
# shard of random token ids (below 49152) in it ($dir/bench_train_000.bin: the timing does not depend on the
# text), and gives
#   config SHAPE FILE [--key value ...]   a config for SHAPE (gpt2: GPT-2 124M; smollm2: SmolLM2-135M's
#                                         Llama; llama1b: a ~1B Llama) over that shard, 1 thread a rank,
#                                         AdamW, clipping 1.0, DeepSpeed's buckets as the peers' (1e7);
#                                         after FILE, "dotted.key value" pairs override it
#   bench NP ARGS...                      `ztrain bench` on NP ranks under mpirun (NP 1: no mpirun)
#   header                                the machine's line
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 bench/random_tokens.py "$dir/bench_train_000.bin" 1048576 49152  # below every shape's vocabulary

config() {
  local shape=$1 file=$2
  shift 2
  /usr/bin/python3 - "$shape" "$file" "$dir" "$@" <<'PY'
import json, sys
shape, path, d, *pairs = sys.argv[1:]
shapes = {
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "padded_vocab_size": 50304,
             "max_seq_len": 1024},
    "smollm2": {"arch": "llama", "n_layer": 30, "n_head": 9, "n_kv_head": 3, "n_embd": 576, "intermediate_size": 1536,
                "vocab_size": 49152, "max_seq_len": 2048, "rope_theta": 100000.0},
    "llama1b": {"arch": "llama", "n_layer": 16, "n_head": 32, "n_kv_head": 8, "n_embd": 2048, "intermediate_size": 8192,
                "vocab_size": 49152, "max_seq_len": 2048, "rope_theta": 100000.0},
}
model = shapes[shape]
c = {"model": model,
     "data": {"format": "llmc", "train": f"{d}/bench_train_*.bin", "seq_len": 256},
     "train": {"steps": 4, "threads": 1, "val_interval": 0},
     "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1, "gradient_clipping": 1.0,
     "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
     # The buckets bench/peers_step.py gives DeepSpeed.
     "zero_optimization": {"reduce_bucket_size": 1e7, "stage3_prefetch_bucket_size": 1e7,
                           "stage3_param_persistence_threshold": 1e5}}
for key, value in zip(pairs[::2], pairs[1::2]):
    *parents, last = key.split(".")
    node = c
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = json.loads(value) if value[:1] in "0123456789-[{tf\"" else value
json.dump(c, open(path, "w"), indent=1)
PY
}

bench() {
  local np=$1
  shift
  if [ "$np" -eq 1 ]; then
    "$build/ztrain" bench "$@"
  else
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$build/ztrain" bench "$@"
  fi
}

header() {
  echo "== $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
}
