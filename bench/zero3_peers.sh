#!/usr/bin/env bash
# ZeRO stage 3 against its peers on the GPT-2 124M shape, measured in one run: 2 ranks, one thread a
# rank, micro-batch 2 x T 256 per rank (random tokens), fp32, AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8,
# weight decay 0.1), gradient clipping 1.0. ztrain (build/ztrain train under mpirun), PyTorch FSDP2
# (fully_shard per block and at the root, gloo) and DeepSpeed ZeRO-3 (gloo, DS_ACCELERATOR=cpu,
# torch.optim.AdamW as its client optimizer), the peers from scripts/install-peers.sh's environment
# through bench/peers_step.py under torchrun. Each runs the same number of steps; the step time is
# the median of the steps after the first. Prints ms/step, tokens/s and ztrain's tokens/s over each
# peer's (target >= 1.2x).
#   bench/zero3_peers.sh [build-dir] [steps]
# ZERO3_PEERS_TINY=1 runs a tiny model (2 layers, 64 channels, T 32) instead, to check the script.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-4}
[[ $steps =~ ^[0-9]+$ && $steps -ge 2 ]] || { echo "zero3_peers: steps must be an integer >= 2, got '$steps'" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
np=2 B=2 T=256 L=12 H=12 C=768 V=50257 Vp=50304 maxT=1024
if [[ ${ZERO3_PEERS_TINY:-0} == 1 ]]; then
  T=32 L=2 H=2 C=64  # vocabulary as GPT-2's: random_tokens.py draws ids below 50257
fi

py=$(bash scripts/install-peers.sh | tail -n 1)  # DeepSpeed's logger writes to stdout: the path is the last line
/usr/bin/python3 bench/random_tokens.py "$dir/bench_train_000.bin"  # the timing does not depend on the text
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": $L, "n_head": $H, "n_embd": $C, "vocab_size": $V, "padded_vocab_size": $Vp,
           "max_seq_len": $maxT},
 "data": {"format": "llmc", "train": "$dir/bench_train_*.bin", "seq_len": $T},
 "train": {"steps": $steps, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": $B, "steps_per_print": 1, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
 "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1e7, "reduce_bucket_size": 1e7,
                       "stage3_param_persistence_threshold": 1e5}}
JSON

echo "== $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "== GPT-2 L$L C$C V$V, $np ranks x 1 thread, B $B x T $T per rank, fp32, $steps steps (median of the last $((steps - 1)))"
failed=()

if "${launch[@]}" -np $np "$build/ztrain" train --config "$dir/c.json" --metrics "$dir/ztrain.jsonl" \
     > "$dir/ztrain.out" 2>&1; then
  grep -E "^step" "$dir/ztrain.out" | sed "s/^/ztrain: /" || true
else
  echo "zero3_peers: ztrain FAILED (exit status $?); the end of its output:"
  tail -n 30 "$dir/ztrain.out" | sed "s/^/  | /"
  failed+=(ztrain)
fi

# The ranks' own last lines: torchrun's report of a failed rank (its own traceback) starts at its
# "...multiprocessing/api.py:N] failed (exitcode: ...)" line, which is kept and what follows dropped.
peer_tail() {
  if grep -q 'multiprocessing/api.py:[0-9]*\] failed' "$1"; then
    sed '/multiprocessing\/api.py:[0-9]*\] failed/q' "$1" | tail -n 30
  else
    tail -n 30 "$1"
  fi
}
peer_args=(--layers $L --heads $H --channels $C --vocab $V --padded-vocab $Vp --max-seq $maxT
           --batch $B --seq $T --warmup 1 --steps $((steps - 1)))
for impl in fsdp2 deepspeed; do
  if DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 "$py" -m torch.distributed.run --nproc_per_node $np --standalone \
       bench/peers_step.py --impl $impl "${peer_args[@]}" > "$dir/$impl.json" 2> "$dir/$impl.err" &&
     [[ -s "$dir/$impl.json" ]]; then
    grep -E "^$impl (warmup|step) " "$dir/$impl.err" | sed "s/^$impl /$impl: /" || true
  else
    echo "zero3_peers: $impl FAILED (torchrun's exit status, or no JSON line on stdout); the end of its stderr:"
    peer_tail "$dir/$impl.err" | sed "s/^/  | /"
    failed+=("$impl")
  fi
done

/usr/bin/python3 - "$dir" $np $B $T "${failed[@]}" <<'PY'
import json, os, statistics, sys
d, np_, B, T = sys.argv[1], *map(int, sys.argv[2:5])
failed = set(sys.argv[5:])
rows = {}
if "ztrain" not in failed:
    m = [x for x in (json.loads(l) for l in open(os.path.join(d, "ztrain.jsonl"))) if "ms" in x]
    ms = statistics.median(x["ms"] for x in m[1:]) if len(m) > 1 else m[0]["ms"]
    rows["ztrain"] = (ms, np_ * B * T / (ms / 1e3), "")
versions = {}
for impl in ("fsdp2", "deepspeed"):
    if impl in failed:
        continue
    j = json.loads(open(os.path.join(d, f"{impl}.json")).read().strip().splitlines()[-1])
    versions[impl] = f"torch {j['torch']}" + (f", deepspeed {j['deepspeed']}" if j["deepspeed"] else "")
    rows[impl] = (j["ms_per_step"], j["tokens_per_s"], f"loss {j['loss_first']:.3f} -> {j['loss_last']:.3f}")
print()
print("| impl | ms/step | tokens/s | ztrain/impl (tokens/s) |")
print("|---|---|---|---|")
z = rows.get("ztrain")
for impl in ("ztrain", "fsdp2", "deepspeed"):
    if impl not in rows:
        print(f"| {impl} | FAILED | FAILED | - |")
        continue
    ms, tok, _ = rows[impl]
    ratio = "1.00" if impl == "ztrain" else (f"{z[1] / tok:.2f}x (target >= 1.2x)" if z else "-")
    print(f"| {impl} | {ms:.0f} | {tok:.1f} | {ratio} |")
for impl, v in versions.items():
    print(f"{impl}: {v}; {rows[impl][2]}")
if failed:
    print(f"\nFAILED: {', '.join(sorted(failed))} (the end of each one's output is above)")
PY
[[ ${#failed[@]} -eq 0 ]]
