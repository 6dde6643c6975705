#!/bin/sh
# Mixed precision under real mpirun ([Note: mixed precision] in runtime/zero/sharded_unit.hpp).
# - bf16 at np 1-4 x stages 0-3 follows bf16 stage 0 on one rank within BF16_RTOL (the 16-bit
#   reductions round once per rank count, so runs differ in the last bits of bf16 gradients), and
#   stays near the fp32 run;
# - fp16: a rank whose gradients turn non-finite (ZT_POISON_GRADS=RANK:STEP) makes every rank skip
#   that step (the run matches one rank poisoned at the same step) and halves the loss scale;
#   a too-large initial scale overflows, skips and halves until training proceeds;
# - fp32 and bf16: a non-finite gradient norm on one rank stops every rank before the update, or
#   with train.skip_nonfinite_steps is skipped by every rank.
# usage: test_precision.sh MPIRUN ZTRAIN
set -u
mpirun=$1 ztrain=$2
here=$(dirname "$0")
. "$here/common.sh"
BF16_RTOL=5e-3

cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 3, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 20, "threads": 1, "val_interval": 10, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 12, "steps_per_print": 1, "gradient_clipping": 1.0,
 "optimizer": {"params": {"lr": 0.003}},
 "zero_optimization": {"stage3_param_persistence_threshold": 0}}
JSON

train fp32 1
train bf16 1 --set bf16.enabled=true
for np in 2 3 4; do
  for stage in 0 1 2 3; do
    train "bf16_np${np}_s${stage}" "$np" --set bf16.enabled=true --set zero_optimization.stage="$stage" \
      --set train_micro_batch_size_per_gpu=$((12 / np))
  done
done
for f in "$dir"/bf16_np*.jsonl; do
  /usr/bin/python3 "$here/compare_metrics.py" "$dir/bf16.jsonl" "$f" --lines 22 --rtol $BF16_RTOL > "$dir/cmp.out" ||
    fail "$(basename "$f" .jsonl) leaves bf16 on one rank: $(cat "$dir/cmp.out")"
  echo "$(basename "$f" .jsonl): $(cat "$dir/cmp.out")"
done
/usr/bin/python3 "$here/compare_metrics.py" "$dir/fp32.jsonl" "$dir/bf16.jsonl" --keys loss,val_loss --rtol 0.05 ||
  fail "bf16 strays more than 5% from fp32"
grep -q "bf16 parameters and gradients, fp32 masters" "$dir/bf16.out" || fail "banner does not say bf16: $(head -3 "$dir/bf16.out")"

# fp16: rank 1 of 2 overflows at step 5 (stage 3); one rank overflowing at step 5 is the reference.
fp16="--set fp16.enabled=true --set fp16.hysteresis=1 --set fp16.initial_scale_power=8"
export ZT_POISON_GRADS=1:5
train fp16_np2_poisoned 2 $fp16 --set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=6
export ZT_POISON_GRADS=0:5
train fp16_poisoned 1 $fp16
unset ZT_POISON_GRADS
/usr/bin/python3 "$here/compare_metrics.py" "$dir/fp16_poisoned.jsonl" "$dir/fp16_np2_poisoned.jsonl" --lines 22 --rtol 5e-3 ||
  fail "2 ranks, one poisoned, do not follow one rank poisoned at the same step"
train fp16_big 2 --set fp16.enabled=true --set fp16.hysteresis=1 --set fp16.initial_scale_power=24 \
  --set zero_optimization.stage=2 --set train_micro_batch_size_per_gpu=6
/usr/bin/python3 - "$dir" <<'PY' || fail "fp16 loss scaling (see above)"
import json, os, sys
d = sys.argv[1]
def steps(name):
    return [r for r in map(json.loads, open(os.path.join(d, name + ".jsonl"))) if "loss" in r]
p = steps("fp16_np2_poisoned")
skipped = [r["step"] for r in p if r["skipped"]]
assert skipped == [5], f"poisoned run skipped steps {skipped}, expected [5]"
assert "grad_norm" not in p[4], p[4]
assert p[5]["loss_scale"] == p[4]["loss_scale"] / 2, (p[4], p[5])
print(f"poisoned: step 5 skipped on every rank, loss scale {p[4]['loss_scale']:g} -> {p[5]['loss_scale']:g}")
b = steps("fp16_big")
first_ok = next(r["step"] for r in b if not r["skipped"])
assert first_ok > 3, f"2^24 should overflow for a while, first update at step {first_ok}"
assert all(b[i]["loss_scale"] == b[i - 1]["loss_scale"] / 2 for i in range(1, first_ok - 1)), [r["loss_scale"] for r in b]
assert not any(r["skipped"] for r in b[first_ok:]), "overflows after the scale settled"
assert b[-1]["loss"] < b[first_ok - 1]["loss"] - 0.3, (b[first_ok - 1]["loss"], b[-1]["loss"])
print(f"scale 2^24: steps 1-{first_ok - 1} overflowed and were skipped, scale {b[0]['loss_scale']:g} -> "
      f"{b[first_ok - 1]['loss_scale']:g}; loss {b[first_ok - 1]['loss']:.3f} -> {b[-1]['loss']:.3f}")
PY
grep -q "overflow: step skipped" "$dir/fp16_big.out" || fail "progress lines do not report skipped steps"

# bf16 and fp32 ([Note: non-finite steps] in runtime/train/trainer.hpp): a gradient norm that is not
# finite on one rank stops every rank before the update, naming the step; with
# train.skip_nonfinite_steps every rank skips it, so poisoning rank 0 or rank 1 gives the same run.
ZT_POISON_GRADS=1:3 timeout 60 "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -x ZT_POISON_GRADS -np 2 \
  "$ztrain" train --config "$dir/c.json" --steps 6 --set train.val_interval=0 --set bf16.enabled=true --set zero_optimization.stage=3 \
  --set train_micro_batch_size_per_gpu=6 > "$dir/nan_stop.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -Eq "step 3: loss [0-9.]+, gradient norm (NaN|inf) .*stops before this step's update" \
  "$dir/nan_stop.out" || fail "a non-finite gradient norm did not stop the run (exit $rc): $(tail -3 "$dir/nan_stop.out")"
grep -q "step     3/" "$dir/nan_stop.out" && fail "the poisoned step 3 was trained on"
skip="--steps 6 --set train.val_interval=0 --set train.skip_nonfinite_steps=1 --set zero_optimization.stage=2 --set train_micro_batch_size_per_gpu=6"
export ZT_POISON_GRADS=1:3
train nan_skip_r1 2 $skip
export ZT_POISON_GRADS=0:3
train nan_skip_r0 2 $skip
unset ZT_POISON_GRADS
/usr/bin/python3 "$here/compare_metrics.py" "$dir/nan_skip_r0.jsonl" "$dir/nan_skip_r1.jsonl" --rtol 0 --lines 6 ||
  fail "skipping a step poisoned on rank 0 differs from one poisoned on rank 1: the ranks did not skip together"
/usr/bin/python3 - "$dir/nan_skip_r1.jsonl" <<'PY' || fail "the skipped non-finite step (see above)"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
assert [r["step"] for r in rows if r.get("skipped")] == [3], rows
assert rows[2].get("nonfinite") and "grad_norm" not in rows[2], rows[2]
assert all("grad_norm" in r for r in rows[3:]), rows[3:]
print("non-finite step 3 skipped on every rank; steps 4-6 trained on")
PY
finish "precision checks passed"
