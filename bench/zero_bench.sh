#!/usr/bin/env bash
# ZeRO stages 0-3 on the GPT-2 124M shape, measured in one run: 2 ranks under mpirun, one thread a
# rank, the same global batch (2 ranks x micro-batch 2 x T 256, random tokens), fp32. For each stage:
# step time (median of the steps after the first), tokens/s, per-rank peak memory by category, the
# ratio to stage 0, and the share of each collective's time hidden behind compute (from --trace).
# Then per-rank model-state memory (parameters + gradients + AdamW states, peak) of stage 3 at 4
# ranks against one rank (target <= 0.3x).
#   bench/zero_bench.sh [build-dir] [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-4}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

/usr/bin/python3 bench/random_tokens.py "$dir/bench_train_000.bin"  # the timing does not depend on the text
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "padded_vocab_size": 50304,
           "max_seq_len": 1024},
 "data": {"format": "llmc", "train": "$dir/bench_train_*.bin", "seq_len": 256},
 "train": {"steps": $steps, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1, "gradient_clipping": 1.0,
 "zero_optimization": {"stage3_prefetch_bucket_size": 1e7, "reduce_bucket_size": 1e7,
                       "stage3_param_persistence_threshold": 1e5}}
JSON

echo "== $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for stage in 0 1 2 3; do
  "${launch[@]}" -np 2 "$build/ztrain" train --config "$dir/c.json" --set zero_optimization.stage=$stage \
    --metrics "$dir/s$stage.jsonl" --trace "$dir/s$stage.trace.json" > "$dir/s$stage.out" 2>&1 ||
    { cat "$dir/s$stage.out"; exit 1; }
  grep -E "^step|^trace|collectives progress" "$dir/s$stage.out" | sed "s/^/stage $stage: /"
done

# Model states per rank: one step of stage 0 on one rank against stage 3 on four (short sequences:
# only the states matter here).
mem=(--steps 1 --set data.seq_len=64 --set train_micro_batch_size_per_gpu=1)
"$build/ztrain" train --config "$dir/c.json" "${mem[@]}" --metrics "$dir/m1.jsonl" > "$dir/m1.out" 2>&1 ||
  { cat "$dir/m1.out"; exit 1; }
"${launch[@]}" -np 4 "$build/ztrain" train --config "$dir/c.json" "${mem[@]}" --set zero_optimization.stage=3 \
  --set zero_optimization.stage3_param_persistence_threshold=0 --metrics "$dir/m4.jsonl" > "$dir/m4.out" 2>&1 ||
  { cat "$dir/m4.out"; exit 1; }

/usr/bin/python3 - "$dir" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
def lines(name):
    return [json.loads(l) for l in open(os.path.join(d, name))]
MiB = 1 << 20
cats = ("parameters", "gradients", "optimizer", "activations", "communication")
rows = {}
for s in range(4):
    m = lines(f"s{s}.jsonl")
    ms = statistics.median(x["ms"] for x in m[1:]) if len(m) > 1 else m[0]["ms"]
    rows[s] = (ms, m[-1]["peak_bytes"])
base = rows[0][0]
print()
print("| stage | step ms | x stage 0 | tok/s | " + " | ".join(f"{c} MiB" for c in cats) + " | total MiB |")
print("|---|---|---|---|" + "---|" * (len(cats) + 1))
for s, (ms, peak) in rows.items():
    tok = 2 * 2 * 256 / (ms / 1e3)
    print(f"| {s} | {ms:.0f} | {ms / base:.2f} | {tok:.1f} | " +
          " | ".join(f"{peak[c] / MiB:.1f}" for c in cats) + f" | {peak['total'] / MiB:.1f} |")
states = lambda p: p["parameters"] + p["gradients"] + p["optimizer"]
one, four = states(lines("m1.jsonl")[-1]["peak_bytes"]), states(lines("m4.jsonl")[-1]["peak_bytes"])
print(f"\nmodel states per rank: 1 rank {one / MiB:.0f} MiB, stage 3 on 4 ranks {four / MiB:.0f} MiB = "
      f"{four / one:.3f}x (target <= 0.3x)")
PY
