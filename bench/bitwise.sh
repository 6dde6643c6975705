#!/usr/bin/env bash
# The numbers a change must not move: a small GPT-2 trained at np 1-3 x ZeRO stages 0-3 x fp32/bf16
# x offload none/cpu/nvme (offload where the stage and precision allow it); a small Llama (grouped
# KV heads, untied head) at np 1-2 x stages 0 and 3 x fp32/bf16; LoRA on that Llama (every linear
# layer, the frozen model replicated and sharded); and hybrid sharding (HYBRID_SHARD, MiCS, hpZ) on
# 4 ranks. Each case's metrics (steps, losses, validation losses, gradient norms, learning rates,
# without the timings) and the saved model (safetensors, its SHA-256) written under OUT. Run it
# before and after a refactor and `diff -r` the two folders: an empty diff is the bitwise-identical
# claim.
#   bench/bitwise.sh OUT [build-dir]
set -euo pipefail
out=$(realpath -m "$1")
build=$(realpath "${2:-build}")
cd "$(dirname "$0")/.."
mkdir -p "$out"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 3, "n_head": 2, "n_embd": 32, "max_seq_len": 32, "wte_units": 2},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32, "shuffle": true,
          "val_fraction": 0.05},
 "train": {"steps": 6, "threads": 1, "val_interval": 3, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 6, "gradient_accumulation_steps": 2, "steps_per_print": 1,
 "gradient_clipping": 0.5, "optimizer": {"params": {"lr": 0.003, "weight_decay": 0.1}},
 "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 6, "warmup_num_steps": 2}},
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 5000,
                       "reduce_bucket_size": 5000, "sub_group_size": 3000}}
JSON
launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
# record NAME NP CONFIG [args]: one case's numbers under OUT.
record() {
  local name=$1 np=$2 config=$3
  shift 3
  local runner=()
  [ "$np" -gt 1 ] && runner=("${launch[@]}" -np "$np")
  "${runner[@]}" "$build/ztrain" train --config "$config" --metrics "$dir/m.jsonl" "$@" \
    --set train.save_model="$dir/model.safetensors" > "$dir/log" 2>&1 || { cat "$dir/log"; exit 1; }
  /usr/bin/python3 - "$dir/m.jsonl" > "$out/$name.metrics" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: v for k, v in sorted(r.items())
                      if k in ("step", "loss", "val_loss", "grad_norm", "lr", "loss_scale", "skipped")}))
PY
  sha256sum < "$dir/model.safetensors" | cut -d' ' -f1 > "$out/$name.model"
  echo "$name $(tail -1 "$out/$name.metrics")"
}

for np in 1 2 3; do
  for stage in 0 1 2 3; do
    for prec in fp32 bf16; do
      for off in none cpu nvme; do
        [ "$off" != none ] && { [ "$stage" = 0 ] || [ "$prec" = fp32 ]; } && continue
        args=(--set zero_optimization.stage=$stage --set train_micro_batch_size_per_gpu=$((6 / np)))
        [ "$prec" = bf16 ] && args+=(--set bf16.enabled=true)
        if [ "$off" != none ]; then
          mkdir -p "$dir/nvme"
          args+=(--set zero_optimization.offload_optimizer.device=$off
                 --set zero_optimization.offload_optimizer.nvme_path="$dir/nvme")
          [ "$stage" = 3 ] && args+=(--set zero_optimization.offload_param.device=$off
                                     --set zero_optimization.offload_param.nvme_path="$dir/nvme"
                                     --set zero_optimization.offload_param.max_in_cpu=0)
        fi
        record "np${np}_s${stage}_${prec}_${off}" "$np" "$dir/c.json" "${args[@]}"
      done
    done
  done
done

# The Llama family and LoRA on it (fresh adapters from the seed).
cat > "$dir/llama.json" <<JSON
{"model": {"arch": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 32, "intermediate_size": 48,
           "tie_word_embeddings": false, "max_seq_len": 32, "rope_theta": 500000, "wte_units": 2},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32, "shuffle": true,
          "val_fraction": 0.05},
 "train": {"steps": 6, "threads": 1, "val_interval": 3, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 4, "steps_per_print": 1, "gradient_clipping": 0.5,
 "optimizer": {"params": {"lr": 0.003}},
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 5000,
                       "reduce_bucket_size": 5000}}
JSON
for np in 1 2; do
  for stage in 0 3; do
    for prec in fp32 bf16; do
      args=(--set zero_optimization.stage=$stage --set train_micro_batch_size_per_gpu=$((4 / np)))
      [ "$prec" = bf16 ] && args+=(--set bf16.enabled=true)
      record "llama_np${np}_s${stage}_${prec}" "$np" "$dir/llama.json" "${args[@]}"
    done
  done
done
lora=(--set lora.r=4 --set lora.alpha=8 --set lora.target_modules=all-linear --set optimizer.params.lr=0.01)
record lora_np1 1 "$dir/llama.json" "${lora[@]}"
record lora_np2_s3_sharded 2 "$dir/llama.json" "${lora[@]}" --set zero_optimization.stage=3 \
  --set train_micro_batch_size_per_gpu=2
record lora_np2_s3_replicated 2 "$dir/llama.json" "${lora[@]}" --set zero_optimization.stage=3 \
  --set train_micro_batch_size_per_gpu=2 --set zero_optimization.frozen_params=replicated

# Hybrid sharding on 4 ranks (groups of 2).
h=(--set train_micro_batch_size_per_gpu=1 --set zero_optimization.shard_group_size=2)
record hybrid_shard 4 "$dir/llama.json" "${h[@]}" --set zero_optimization.sharding_strategy=HYBRID_SHARD
record hybrid_mics 4 "$dir/llama.json" --set train_micro_batch_size_per_gpu=1 --set zero_optimization.mics_shard_size=2
record hybrid_hpz 4 "$dir/llama.json" --set train_micro_batch_size_per_gpu=1 --set zero_optimization.stage=3 \
  --set zero_optimization.zero_hpz_partition_size=2
