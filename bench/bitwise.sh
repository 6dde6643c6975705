#!/usr/bin/env bash
# The numbers a change must not move: a small GPT-2 trained at np 1-3 x ZeRO stages 0-3 x fp32/bf16
# x offload none/cpu/nvme (offload where the stage and precision allow it), each case's metrics
# (steps, losses, validation losses, gradient norms, learning rates, without the timings) and the
# saved model (safetensors, its SHA-256) written under OUT. Run it before and after a refactor and
# `diff -r` the two folders: an empty diff is the bitwise-identical claim.
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
for np in 1 2 3; do
  for stage in 0 1 2 3; do
    for prec in fp32 bf16; do
      for off in none cpu nvme; do
        [ "$off" != none ] && { [ "$stage" = 0 ] || [ "$prec" = fp32 ]; } && continue
        name=np${np}_s${stage}_${prec}_${off}
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
        runner=()
        [ "$np" -gt 1 ] && runner=("${launch[@]}" -np "$np")
        "${runner[@]}" "$build/ztrain" train --config "$dir/c.json" --metrics "$dir/m.jsonl" "${args[@]}" \
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
      done
    done
  done
done
