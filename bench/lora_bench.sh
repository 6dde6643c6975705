#!/usr/bin/env bash
# LoRA against full fine-tuning under ZeRO-3, measured in one run: 2 ranks under mpirun, one thread
# a rank, fp32 (PRECISION=bf16: bf16 parameters and gradients, fp32 masters), random tokens, for two Llama shapes: SmolLM2-135M's (30 layers, C=576, 9/3 heads,
# FFN 1536, V=49152, tied; B=2, T=256) and a ~1B one (16 layers, C=2048, 32/8 heads, FFN 8192,
# V=49152, tied; B=1, T=64). For each: full fine-tuning, then LoRA r=16 on all linear layers with
# the frozen model sharded (zero_optimization.frozen_params "sharded"), then replicated (RUNS picks
# some). The buckets are what Hugging Face's Trainer sets for DeepSpeed's "auto": reduce_bucket_size
# C^2, stage3_prefetch_bucket_size 0.9 C^2, stage3_param_persistence_threshold 10 C. Prints the
# step time (median of the steps after the first), per-rank peak memory by category, the model
# states (parameters + gradients + AdamW states) and the ratios to full fine-tuning.
# Targets (issue 21): LoRA step <= 0.75x full; model states of LoRA with the frozen model sharded
# <= 0.2x full's at stage 3.
#   bench/lora_bench.sh [build-dir] [steps] [shapes: smollm2 1b]
set -euo pipefail
cd "$(dirname "$0")/.."
bf16=$([ "${PRECISION:-fp32}" = bf16 ] && echo true || echo false)
runs=${RUNS:-full lora_sharded lora_replicated}
build=${1:-build}
steps=${2:-4}
shapes=${3:-smollm2 1b}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

/usr/bin/python3 bench/random_tokens.py "$dir/tokens.bin" 1000000 49152
shape_keys() {
  case $1 in
    smollm2) echo '"n_layer": 30, "n_head": 9, "n_kv_head": 3, "n_embd": 576, "intermediate_size": 1536, "micro": 2, "seq": 256' ;;
    1b) echo '"n_layer": 16, "n_head": 32, "n_kv_head": 8, "n_embd": 2048, "intermediate_size": 8192, "micro": 1, "seq": 64' ;;
  esac
}

echo "== $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for shape in $shapes; do
  keys=$(shape_keys "$shape")
  micro=$(echo "$keys" | sed 's/.*"micro": \([0-9]*\).*/\1/')
  seq=$(echo "$keys" | sed 's/.*"seq": \([0-9]*\).*/\1/')
  model=$(echo "$keys" | sed 's/, "micro".*//')
  C=$(echo "$keys" | sed 's/.*"n_embd": \([0-9]*\).*/\1/')
  cat > "$dir/c.json" <<JSON
{"model": {"arch": "llama", $model, "vocab_size": 49152, "max_seq_len": 256, "tie_word_embeddings": true},
 "data": {"format": "llmc", "train": "$dir/tokens.bin", "seq_len": $seq},
 "train": {"steps": $steps, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": $micro, "steps_per_print": 1, "gradient_clipping": 1.0,
 "zero_optimization": {"stage": 3, "reduce_bucket_size": $((C * C)), "stage3_prefetch_bucket_size": $((9 * C * C / 10)),
                       "stage3_param_persistence_threshold": $((10 * C))},
 "bf16": {"enabled": $bf16}}
JSON
  lora=(--set lora.r=16 --set lora.alpha=32 --set lora.target_modules=all-linear)
  for run in $runs; do
    case $run in
      full) extra=() ;;
      lora_sharded) extra=("${lora[@]}" --set zero_optimization.frozen_params=sharded) ;;
      lora_replicated) extra=("${lora[@]}" --set zero_optimization.frozen_params=replicated) ;;
    esac
    "${launch[@]}" -np 2 "$build/ztrain" train --config "$dir/c.json" "${extra[@]}" \
      --metrics "$dir/${shape}_$run.jsonl" > "$dir/${shape}_$run.out" 2>&1 || { cat "$dir/${shape}_$run.out"; exit 1; }
    grep -E "^model|^LoRA|^step +$steps/" "$dir/${shape}_$run.out" | sed "s/^/$shape $run: /"
  done
done

/usr/bin/python3 - "$dir" "$shapes" "$runs" <<'PY'
import json, os, statistics, sys
d, shapes, runs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
MiB = 1 << 20
cats = ("parameters", "gradients", "optimizer", "activations", "communication")
print()
print("| shape | run | step ms | x full | " + " | ".join(f"{c} MiB" for c in cats) +
      " | model states MiB | x full | total MiB |")
print("|---|---|---|---|" + "---|" * len(cats) + "---|---|---|")
for shape in shapes:
    base_ms = base_states = None
    for run in runs:
        m = [json.loads(l) for l in open(os.path.join(d, f"{shape}_{run}.jsonl"))]
        ms = statistics.median(x["ms"] for x in m[1:])
        peak = m[-1]["peak_bytes"]
        states = peak["parameters"] + peak["gradients"] + peak["optimizer"]
        if run == "full":
            base_ms, base_states = ms, states
        ratio = lambda x, base: f"{x / base:.2f}" if base else "-"
        print(f"| {shape} | {run} | {ms:.0f} | {ratio(ms, base_ms)} | " +
              " | ".join(f"{peak[c] / MiB:.1f}" for c in cats) +
              f" | {states / MiB:.1f} | {ratio(states, base_states)} | {peak['total'] / MiB:.1f} |")
PY
