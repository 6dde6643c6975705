#!/usr/bin/env bash
# LoRA against full fine-tuning under ZeRO-3 through `ztrain bench`: 2 ranks, one thread a rank,
# fp32 (PRECISION=bf16: bf16 parameters and gradients, fp32 masters), random tokens, for two Llama
# shapes: SmolLM2-135M's (30 layers, C=576, 9/3 heads, FFN 1536, V=49152, tied; B=2, T=256) and a
# ~1B one (16 layers, C=2048, 32/8 heads, FFN 8192, V=49152, tied; B=1, T=64). A sweep of lora.r
# 0 (full fine-tuning) and 16 (all linear layers, alpha 32) crossed with
# zero_optimization.frozen_params sharded and replicated (which full fine-tuning ignores: its two
# rows are one run twice). The buckets are what Hugging Face's Trainer sets for DeepSpeed's
# "auto": reduce_bucket_size C^2, stage3_prefetch_bucket_size 0.9 C^2, persistence threshold 10 C.
# Prints the bench's table, then the model states (parameters + gradients + AdamW states) and the
# step time of each row against full fine-tuning's.
# Targets (issue 21): LoRA step <= 0.75x full; model states of LoRA with the frozen model sharded
# <= 0.2x full's at stage 3.
#   bench/lora_bench.sh [build-dir] [steps] [shapes: smollm2 1b]
. "$(dirname "$0")/common.sh"
bf16=$([ "${PRECISION:-fp32}" = bf16 ] && echo true || echo false)
steps=${2:-3}
shapes=${3:-smollm2 1b}
header
for shape in $shapes; do
  case $shape in
    smollm2) C=576 micro=2 seq=256 ;;
    1b) C=2048 micro=1 seq=64 ;;
  esac
  config "$([ "$shape" = 1b ] && echo llama1b || echo smollm2)" "$dir/$shape.json" model.max_seq_len 256 \
    data.seq_len $seq train_micro_batch_size_per_gpu $micro zero_optimization.stage 3 \
    zero_optimization.reduce_bucket_size $((C * C)) zero_optimization.stage3_prefetch_bucket_size $((9 * C * C / 10)) \
    zero_optimization.stage3_param_persistence_threshold $((10 * C)) bf16.enabled $bf16
  bench 2 --config "$dir/$shape.json" --steps "$steps" --set lora.alpha=32 --set lora.target_modules=all-linear \
    --sweep lora.r=0,16 --sweep zero_optimization.frozen_params=sharded,replicated --out "$dir/$shape.out"
done
/usr/bin/python3 - "$dir" "$shapes" <<'PY'
import json, sys
d, shapes = sys.argv[1], sys.argv[2].split()
MiB = 1 << 20
print("\n| shape | point | step ms | x full | model states MiB | x full | total MiB |\n|---|---|---|---|---|---|---|")
for shape in shapes:
    rows = json.load(open(f"{d}/{shape}.out"))["rows"]
    states = lambda r: sum(r["peak_bytes"][c] for c in ("parameters", "gradients", "optimizer"))
    full = rows[0]
    for r in rows:
        if "error" in r:
            print(f"| {shape} | {r['label']} | failed: {r['error']} | | | | |")
            continue
        print(f"| {shape} | {r['label']} | {r['ms_median']:.0f} | {r['ms_median'] / full['ms_median']:.2f} | "
              f"{states(r) / MiB:.1f} | {states(r) / states(full):.2f} | {r['peak_total_bytes'] / MiB:.1f} |")
PY
