#!/bin/sh
# Activation checkpointing ([Note: activation checkpointing] in tensor/tape.hpp) under real mpirun:
# on GPT-2 and on a tiny Llama (grouped-query attention, an untied head, both cut into 2 units),
# fp32, np 1-3 x stages 0-3, each mode (full, selective by op, selective every 2nd block) gives the
# losses, gradient norms and saved model of the same run without, bit for bit; cpu_checkpointing
# too; so does LoRA over a frozen sharded (and a replicated) base, with LoRA's dropout, whose masks
# the recompute draws again. Each mode's measured activation peak is within 10% of `ztrain
# estimate`'s, and every mode's below none's; the recompute spans are in the trace; bad settings
# end with a message naming the key.
# usage: test_checkpointing.sh MPIRUN ZTRAIN PYTHON
set -u
mpirun=$1 ztrain=$2 python=$3
here=$(dirname "$0")
. "$here/common.sh"

full="--set activation_checkpointing.mode=full"
op="--set activation_checkpointing.mode=selective --set activation_checkpointing.selective_ac_option=op"
blk="--set activation_checkpointing.mode=selective --set activation_checkpointing.selective_ac_option=2"

# config MODEL: the run's config in $dir/c.json.
config() {
  if [ "$1" = gpt2 ]; then
    m='"n_layer": 4, "n_head": 2, "n_embd": 32, "max_seq_len": 32, "wte_units": 2'
  else
    m='"arch": "llama", "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 32, "intermediate_size": 48,
       "tie_word_embeddings": false, "max_seq_len": 32, "wte_units": 2'
  fi
  cat > "$dir/c.json" <<JSON
{"model": {$m},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 4, "threads": 1, "val_interval": 2, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 12, "steps_per_print": 1, "gradient_clipping": 0.5,
 "optimizer": {"params": {"lr": 0.003}},
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 9000,
                       "reduce_bucket_size": 9000}}
JSON
}

# run NAME NP [--set ...]: a run saving its model to $dir/NAME.safetensors; its name into $dir/runs
# with the reference it must equal (the line's first run of the group: none).
group=""
run() {
  name=$1 np=$2
  shift 2
  train "$name" "$np" --set train.save_model="$dir/$name.safetensors" "$@"
  [ -n "$group" ] && echo "$group $name" >> "$dir/runs"
}

for model in gpt2 llama; do
  config $model
  for np in 1 2 3; do
    for stage in 0 1 2 3; do
      s="--set zero_optimization.stage=$stage --set train_micro_batch_size_per_gpu=$((12 / np))"
      group="" run "${model}_np${np}_s${stage}" "$np" $s
      group="${model}_np${np}_s${stage}"
      run "$group.full" "$np" $s $full
      run "$group.op" "$np" $s $op
      run "$group.blk" "$np" $s $blk
      group=""
    done
  done
  # cpu_checkpointing: the inputs leave the device and come back one block ahead.
  group="${model}_np2_s3"
  run "$group.host" 2 --set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=6 $full \
    --set activation_checkpointing.cpu_checkpointing=true
  run "$group.ophost" 2 --set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=6 $op \
    --set activation_checkpointing.cpu_checkpointing=true
  group=""
  # The estimate's activations per mode, for the np 2 stage 3 runs.
  "$ztrain" estimate --config "$dir/c.json" --world-size 2 --format json --set zero_optimization.stage=3 \
    --set train_micro_batch_size_per_gpu=6 > "$dir/est_$model.json" 2> "$dir/est.err" ||
    fail "estimate ($model): $(cat "$dir/est.err")"
done

# LoRA (all linear layers, dropout 0.1) over the frozen Llama, sharded and replicated at stage 3,
# and over GPT-2's fused c_attn; the none run of each first.
lora="--set lora.r=4 --set lora.alpha=8 --set lora.dropout=0.1 --set lora.target_modules=all-linear"
for model in llama gpt2; do
  config $model
  for np in 2 3; do
    for frozen in sharded replicated; do
      [ $model = gpt2 ] && [ $frozen = replicated ] && continue
      s="--set zero_optimization.stage=3 --set zero_optimization.frozen_params=$frozen --set train_micro_batch_size_per_gpu=$((12 / np))"
      group="" run "lora_${model}_np${np}_$frozen" "$np" $s $lora
      group="lora_${model}_np${np}_$frozen"
      run "$group.full" "$np" $s $lora $full
      run "$group.op" "$np" $s $lora $op
      run "$group.blk" "$np" $s $lora $blk --set activation_checkpointing.cpu_checkpointing=true
      group=""
    done
  done
done

"$python" - "$dir" <<'PY' || fail "a checkpointed run differs from the run without, or its peak from the estimate (see above)"
import filecmp, json, os, sys
d = sys.argv[1]
def numbers(name):
    path = os.path.join(d, name + ".jsonl")
    if not os.path.exists(path):
        return None
    return [{k: v for k, v in json.loads(l).items() if k in ("step", "loss", "val_loss", "grad_norm", "lr")} for l in open(path)]
def peak(name):
    return [json.loads(l) for l in open(os.path.join(d, name + ".jsonl")) if '"peak_bytes"' in l][-1]["peak_bytes"]["activations"]
bad = 0
pairs = [l.split() for l in open(os.path.join(d, "runs"))]
for ref, got in pairs:
    a, b = numbers(ref), numbers(got)
    same = a is not None and a == b and len(a) == 6
    model = filecmp.cmp(os.path.join(d, ref + ".safetensors"), os.path.join(d, got + ".safetensors"), shallow=False) \
        if os.path.exists(os.path.join(d, got + ".safetensors")) else False
    if not (same and model):
        print(f"{got}: {'metrics' if not same else 'saved model'} differ from {ref}")
        bad += 1
print(f"{len(pairs)} checkpointed runs: losses, gradient norms and saved models bitwise equal to the run without"
      if not bad else f"{bad} of {len(pairs)} checkpointed runs differ")
# Measured against estimated activation peaks at np 2, stage 3.
names = {"none": "", "full": ".full", "selective op": ".op", "selective every 2nd block": ".blk"}
for model in ("gpt2", "llama"):
    est = json.load(open(os.path.join(d, f"est_{model}.json")))["activation_checkpointing"]["modes"]
    none = peak(f"{model}_np2_s3")
    for mode, suffix in names.items():
        got, want = peak(f"{model}_np2_s3{suffix}"), est[mode]["peak_bytes"]["activations"]
        off = abs(got - want) / want
        lower = mode == "none" or got < none
        print(f"{model} {mode:>26}: activations measured {got:>8}, estimate {want:>8} ({off:+.1%}), "
              f"{got / none:.2f}x none{'' if off <= 0.10 and lower else '  FAIL'}")
        bad += off > 0.10 or not lower
sys.exit(1 if bad else 0)
PY

# The trace shows each block's recompute; the banner names the mode.
config llama
train traced 1 --steps 2 $blk --set train.trace="$dir/trace.json"
for b in block1 block3; do grep -q "\"recompute $b\"" "$dir/trace.json" || fail "the trace lacks the recompute of $b"; done
grep -q '"recompute block0"' "$dir/trace.json" && fail "selective every 2nd block recomputed block0"
grep -q "activation checkpointing: selective every 2nd block (2 of 4 blocks recomputed in backward)" "$dir/traced.out" ||
  fail "the banner does not name the mode: $(cat "$dir/traced.out")"

# The process's resident set follows what checkpointing saves ([Note: host block cache]): a GPT-2
# of 12 thin blocks at micro-batch 32, one rank, stage 0, without and with full checkpointing,
# against a one-block run for the process's own floor. Each run's resident high-water mark above
# the floor stays within 10% (and 8 MiB) of what its allocator reserved at its peak, the reserved
# peak within 10% (and 2 MiB) of the bytes in use, and the resident set falls by at least 80% of
# what the in-use peak falls. (The GPU libraries loaded at start once put a 250 MiB floor under
# every run: [Note: GPU libraries on first use].)
cat > "$dir/rss.json" <<JSON
{"model": {"n_layer": 12, "n_head": 4, "n_embd": 64, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 3, "threads": 1, "val_interval": 0}, "train_micro_batch_size_per_gpu": 32}
JSON
for run in floor none full; do
  case $run in
    floor) extra="--set model.n_layer=1 --set train_micro_batch_size_per_gpu=1" ;;
    full) extra="--set activation_checkpointing={}" ;;
    *) extra="" ;;
  esac
  # shellcheck disable=SC2086
  "$ztrain" train --config "$dir/rss.json" --metrics "$dir/rss_$run.jsonl" $extra > "$dir/rss_$run.out" 2>&1 ||
    fail "rss $run: $(cat "$dir/rss_$run.out")"
done
/usr/bin/python3 - "$dir" <<'PY' || fail "the resident set does not follow the accounted peak (see above)"
import json, sys
d = sys.argv[1]
last = lambda run: [json.loads(l) for l in open(f"{d}/rss_{run}.jsonl")][-1]
MiB = 2 ** 20
floor = last("floor")["rss_peak_bytes"]
bad = 0
runs = {}
for run in ("none", "full"):
    m = last(run)
    rss, reserved, used = m["rss_peak_bytes"] - floor, m["reserved_bytes"], m["peak_bytes"]["total"]
    runs[run] = (rss, used)
    print(f"{run}: resident above the floor {rss / MiB:.1f} MiB, reserved {reserved / MiB:.1f} MiB, in use {used / MiB:.1f} MiB")
    if rss > 1.10 * reserved + 8 * MiB: print(f"FAIL: {run}: resident {rss / MiB:.1f} MiB > 1.1 x reserved + 8 MiB"); bad += 1
    if reserved > 1.10 * used + 2 * MiB: print(f"FAIL: {run}: reserved {reserved / MiB:.1f} MiB > 1.1 x in use + 2 MiB"); bad += 1
saved_rss, saved_used = runs["none"][0] - runs["full"][0], runs["none"][1] - runs["full"][1]
print(f"checkpointing saves {saved_used / MiB:.1f} MiB in use and {saved_rss / MiB:.1f} MiB resident")
if saved_rss < 0.8 * saved_used: print("FAIL: the resident set does not fall with the bytes in use"); bad += 1
sys.exit(1 if bad else 0)
PY

# Bad settings name their key.
expect 1 "activation_checkpointing.mode: expected \"full\", \"selective\" or \"none\", got \"partial\"" -- \
  "$ztrain" train --config "$dir/c.json" --set activation_checkpointing.mode=partial
expect 1 "activation_checkpointing.selective_ac_option: expected \"op\" or a block frequency k >= 1, got \"0\"" -- \
  "$ztrain" train --config "$dir/c.json" --set activation_checkpointing.mode=selective --set activation_checkpointing.selective_ac_option=0
expect 1 "activation_checkpointing.selective_ac_option: applies to mode \"selective\", and mode is \"full\"" -- \
  "$ztrain" train --config "$dir/c.json" --set activation_checkpointing.selective_ac_option=op
expect 1 "activation_checkpointing.cpu_checkpointing: moves checkpoints to host memory, and mode is \"none\"" -- \
  "$ztrain" train --config "$dir/c.json" --set activation_checkpointing.mode=none --set activation_checkpointing.cpu_checkpointing=true
expect 1 "activation_checkpointing.pin_memory" -- \
  "$ztrain" train --config "$dir/c.json" --set activation_checkpointing.pin_memory=true

finish "activation checkpointing checks passed"
