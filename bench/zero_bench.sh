#!/usr/bin/env bash
# ZeRO stages 0-3 on the GPT-2 124M shape through `ztrain bench`: 2 ranks, one thread a rank, the
# same global batch (2 ranks x micro-batch 2 x T 256, random tokens), fp32. One row a stage: step
# time, tokens/s, MFU, per-rank peak memory by category beside `ztrain estimate`'s, bytes sent,
# the collectives' exposed and hidden time, the ratio to stage 0. Then per-rank model states
# (parameters + gradients + AdamW states) of stage 3 at 4 ranks against stage 0 on one rank
# (target <= 0.3x).
#   bench/zero_bench.sh [build-dir] [steps]
. "$(dirname "$0")/common.sh"
steps=${2:-3}
header
config gpt2 "$dir/c.json"
bench 2 --config "$dir/c.json" --steps "$steps" --plot "$dir/zero_bench.png"
# Model states only: one short step.
mem=(--config "$dir/c.json" --warmup 0 --steps 1 --set data.seq_len=64 --set train_micro_batch_size_per_gpu=1 --format json)
bench 1 "${mem[@]}" --sweep zero_optimization.stage=0 > "$dir/m1.json"
bench 4 "${mem[@]}" --sweep zero_optimization.stage=3 --set zero_optimization.stage3_param_persistence_threshold=0 \
  > "$dir/m4.json"
/usr/bin/python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
states = lambda name: sum(json.load(open(f"{d}/{name}.json"))["rows"][0]["peak_bytes"][c]
                          for c in ("parameters", "gradients", "optimizer"))
one, four = states("m1"), states("m4")
print(f"\nmodel states per rank: 1 rank {one / 2**20:.0f} MiB, stage 3 on 4 ranks {four / 2**20:.0f} MiB = "
      f"{four / one:.3f}x (target <= 0.3x)")
PY
