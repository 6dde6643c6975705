#!/bin/sh
# Checkpoints ([Note: checkpoint layout]) under real runs: 20 steps straight equal 10 steps, a
# stop, and 10 resumed steps, bit for bit (every loss and gradient norm, and the saved model), at
# np 1-3 across stages, fp32, bf16 and fp16 (the loss scaler's state), and with the states
# offloaded to NVMe; keep_last keeps that many. A process killed with SIGKILL at any moment of a
# run that saves every step leaves a checkpoint that loads; a rank killed mid-training ends the job
# within 30 s and the last checkpoint loads. Bad checkpoints end with a message
# naming the problem: none in the folder, `latest` naming a missing folder, a flipped byte (the
# file and the unit), a truncated file, another format version, another model, a read-only
# checkpoint folder (found before the first step) and a disk that fills during a save, which
# leaves no partial folder behind (where mount is permitted). Saved at one world size and stage, a checkpoint
# resumes at another (resharded at load) within the ZeRO tests' tolerance.
# usage: test_checkpoint.sh MPIRUN ZTRAIN
set -u
mpirun=$1 ztrain=$2
here=$(dirname "$0")
. "$here/common.sh"
mnt="$dir/ro"
trap 'umount "$mnt" 2>/dev/null; rm -rf "$dir"' EXIT

cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 4, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32, "shuffle": true},
 "train": {"steps": 20, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 6, "steps_per_print": 1, "gradient_clipping": 0.5,
 "optimizer": {"params": {"lr": 0.003}},
 "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 5, "total_num_steps": 20,
                                                   "warmup_max_lr": 0.003, "warmup_type": "linear"}},
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "sub_group_size": 3000}}
JSON

# resumes NAME NP [args]: NAME_full (20 steps) against NAME_a (10 steps, saving at 5 and 10,
# keeping 1) then NAME_b (--resume, 10 more): the same metrics and final model, bit for bit.
resumes() {
  case=$1 np=$2  # (train() sets $name)
  shift 2
  ck="$dir/ck_$case"
  train "${case}_full" "$np" "$@" --set train.save_model="$dir/${case}_full.bin"
  train "${case}_a" "$np" "$@" --steps 10 --set checkpoint.dir="$ck" --set checkpoint.save_interval=5 \
    --set checkpoint.keep_last=1
  train "${case}_b" "$np" "$@" --set checkpoint.dir="$ck" --resume --set train.save_model="$dir/${case}_b.bin"
  cat "$dir/${case}_a.jsonl" "$dir/${case}_b.jsonl" > "$dir/${case}_ab.jsonl"
  /usr/bin/python3 "$here/compare_metrics.py" "$dir/${case}_full.jsonl" "$dir/${case}_ab.jsonl" --rtol 0 --lines 20 \
    --keys loss,grad_norm,lr > /dev/null 2>&1 || fail "$case: resumed run differs: $(/usr/bin/python3 "$here/compare_metrics.py" \
    "$dir/${case}_full.jsonl" "$dir/${case}_ab.jsonl" --rtol 0 --lines 20 --keys loss,grad_norm,lr 2>&1)"
  cmp -s "$dir/${case}_full.bin" "$dir/${case}_b.bin" || fail "$case: resumed run's final model differs"
  [ "$(ls "$ck")" = "$(printf 'latest\nstep_10')" ] || fail "$case: keep_last 1 left: $(ls "$ck" | tr '\n' ' ')"
}
resumes np1_s0 1
resumes np2_s3 2 --set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=3
resumes np3_s1_bf16 3 --set zero_optimization.stage=1 --set train_micro_batch_size_per_gpu=2 --set bf16.enabled=true
resumes np2_s2_fp16 2 --set zero_optimization.stage=2 --set train_micro_batch_size_per_gpu=3 --set fp16.enabled=true \
  --set fp16.initial_scale_power=24 --set fp16.hysteresis=1
resumes np2_s3_offload 2 --set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=3 --set bf16.enabled=true \
  --set zero_optimization.offload_optimizer.device=nvme --set zero_optimization.offload_optimizer.nvme_path="$dir" \
  --set zero_optimization.offload_param.device=nvme --set zero_optimization.offload_param.nvme_path="$dir" \
  --set zero_optimization.offload_param.max_in_cpu=0
grep -q '"skipped":true' "$dir/np2_s2_fp16_full.jsonl" || fail "the fp16 run never skipped a step: the scaler's state is untested"

# Resharding at load ([Note: resharding]): saved at 2 ranks (stage 3) and resumed at 3 (stage 2),
# saved at 4 (stage 1) and resumed at 1 (stage 3); each continues within the ZeRO tests' tolerance
# (1e-5) of one rank at stage 0 with the same global batch, also with the states on NVMe (read
# from and loaded into the swap files a sub-group at a time); bf16 saved at 2 ranks continues at 3
# (within bf16's 1e-2 of fp32), and continues as fp32 too.
train rs_ref 1 --set train_micro_batch_size_per_gpu=12
reshard() {  # reshard CASE NP_A STAGE_A NP_B STAGE_B [args]
  case=$1 npa=$2 sa=$3 npb=$4 sb=$5
  shift 5
  ck="$dir/ck_$case"
  train "${case}_a" "$npa" "$@" --steps 10 --set zero_optimization.stage="$sa" \
    --set train_micro_batch_size_per_gpu=$((12 / npa)) --set checkpoint.dir="$ck" --set checkpoint.save_interval=10
  train "${case}_b" "$npb" "$@" --set zero_optimization.stage="$sb" --set train_micro_batch_size_per_gpu=$((12 / npb)) \
    --set checkpoint.dir="$ck" --resume
  cat "$dir/${case}_a.jsonl" "$dir/${case}_b.jsonl" > "$dir/${case}_ab.jsonl"
}
reshard rs_2to3 2 3 3 2
reshard rs_4to1 4 1 1 3
reshard rs_bf16 2 3 3 1 --set bf16.enabled=true
reshard rs_offload 2 3 3 3 --set zero_optimization.offload_optimizer.device=nvme \
  --set zero_optimization.offload_optimizer.nvme_path="$dir" --set zero_optimization.offload_param.device=nvme \
  --set zero_optimization.offload_param.nvme_path="$dir" --set zero_optimization.offload_param.max_in_cpu=0
for case in rs_2to3 rs_4to1 rs_offload; do
  /usr/bin/python3 "$here/compare_metrics.py" "$dir/rs_ref.jsonl" "$dir/${case}_ab.jsonl" --rtol 1e-5 --lines 20 \
    --keys loss,grad_norm,lr > "$dir/$case.cmp" 2>&1 || fail "$case: resumed at another world size and stage: $(cat "$dir/$case.cmp")"
done
/usr/bin/python3 "$here/compare_metrics.py" "$dir/rs_ref.jsonl" "$dir/rs_bf16_ab.jsonl" --rtol 1e-2 --lines 20 --keys loss \
  > "$dir/rs_bf16.cmp" 2>&1 || fail "bf16 resumed at 3 ranks, stage 1 drifted: $(cat "$dir/rs_bf16.cmp")"
train rs_tof32 2 --set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=6 --set checkpoint.dir="$dir/ck_rs_bf16" \
  --resume --steps 12
grep -q '"step":12' "$dir/rs_tof32.jsonl" || fail "a bf16 checkpoint did not continue as fp32"

# SIGKILL at several moments of a run that saves every step: the checkpoint `latest` names loads.
kill_at() {  # kill_at DELAY
  ck="$dir/ck_kill"
  # (No `timeout` in front: the kill must reach ztrain itself, not a wrapper that would leave it
  # running and saving beside the next run.) Each run starts anew over the last one's checkpoints,
  # so kills also land while it replaces them (checkpoint.overwrite).
  "$ztrain" train --config "$dir/c.json" --steps 200 --set checkpoint.dir="$ck" --set checkpoint.overwrite=true \
    --set checkpoint.save_interval=1 --set checkpoint.keep_last=2 > "$dir/kill.out" 2>&1 &
  pid=$!
  sleep "$1"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [ -f "$ck/latest" ] || return 0  # killed before the first save completed
  timeout 60 "$ztrain" train --config "$dir/c.json" --steps 201 --set checkpoint.dir="$ck" --resume \
    > "$dir/kill_resume.out" 2>&1 || fail "after SIGKILL at ${1}s the checkpoint did not load: $(tail -2 "$dir/kill_resume.out")"
}
for delay in 0.5 0.8 1.1 1.37 1.6 2.05; do kill_at "$delay"; done
[ -f "$dir/ck_kill/latest" ] || fail "no run lived to its first save: the kill test tested nothing"

# A rank killed mid-training (SIGKILL, at np 2, saving every step) ends the job within 30 s, and
# the last checkpoint loads at np 2.
ck="$dir/ck_death"
"$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 "$ztrain" train --config "$dir/c.json" --steps 100000 \
  --set train_micro_batch_size_per_gpu=3 --set checkpoint.dir="$ck" --set checkpoint.save_interval=1 \
  --set checkpoint.keep_last=2 > "$dir/death.out" 2>&1 &
job=$!
for _ in $(seq 100); do [ -f "$ck/latest" ] && break; sleep 0.1; done
sleep 0.7
victim=$(pgrep -f "^$ztrain train --config $dir/c.json" | tail -1)
if [ -z "$victim" ]; then
  fail "rank death: no rank to kill ($(tail -2 "$dir/death.out"))"
else
  start=$(date +%s)
  kill -9 "$victim"
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    fail "rank death: the job still runs 30 s after a rank was killed"
    pkill -9 -f "checkpoint.dir=$ck"
  fi
  wait "$job" 2>/dev/null
  echo "a killed rank ended the job in $(($(date +%s) - start)) s"
  train death_resume 2 --set train_micro_batch_size_per_gpu=3 --set checkpoint.dir="$ck" --resume \
    --set train.steps=$(($(sed 's/step_//; s/\.new//' "$ck/latest") + 1))
fi

# expect_error NAME PATTERN [args]: a one-rank run fails, saying PATTERN (grep -F).
expect_error() {
  name=$1 pattern=$2
  shift 2
  timeout 60 "$ztrain" train --config "$dir/c.json" --steps 12 "$@" > "$dir/$name.out" 2>&1
  rc=$?
  [ $rc -ne 0 ] && [ $rc -lt 124 ] || fail "$name: expected a failure, exit status $rc"
  grep -qF "$pattern" "$dir/$name.out" || fail "$name: expected '$pattern' in: $(tail -2 "$dir/$name.out")"
}
good="$dir/ck_np1_s0/step_10"
mkdir -p "$dir/empty"
expect_error empty "no checkpoint in '$dir/empty'" --resume "$dir/empty"
mkdir -p "$dir/dangling" && echo step_7 > "$dir/dangling/latest"
expect_error dangling "cannot read '$dir/dangling/step_7/meta.json'" --resume "$dir/dangling"
bad() { rm -rf "$dir/bad" && cp -r "$good" "$dir/bad"; }
bad && printf '\001' | dd of="$dir/bad/rank0.bin" bs=1 seek=5000 conv=notrunc 2>/dev/null
expect_error flipped "'$dir/bad/rank0.bin': unit " --resume "$dir/bad"
grep -q "does not match its checksum" "$dir/flipped.out" || fail "flipped: no checksum message: $(tail -1 "$dir/flipped.out")"
bad && truncate -s 4000 "$dir/bad/rank0.bin"
expect_error truncated "'$dir/bad/rank0.bin' is truncated" --resume "$dir/bad"
bad && sed -i 's/"version": 1/"version": 9/' "$dir/bad/meta.json"
expect_error version "format version 9, this build reads version 1" --resume "$dir/bad"
expect_error shape "saved from another model shape" --resume "$good" --set model.n_layer=3
if mkdir -p "$mnt" && mount -t tmpfs -o ro none "$mnt" 2>/dev/null; then
  # Found before the first step ([Note: outputs checked first]), not at the first save.
  expect_error read_only "checkpoint.dir: cannot create '$mnt/.write-check-rank0-" --set checkpoint.dir="$mnt" \
    --set checkpoint.save_interval=5
  grep -q "step     1/" "$dir/read_only.out" && fail "read_only: the run trained before the folder was found read-only"
  umount "$mnt"
  # A disk that fills during a save (room for one and a half checkpoints): the error names the file
  # and the cause, `latest` still names the previous checkpoint, and it loads.
  kb=$(du -sk "$good" | cut -f1)
  mount -t tmpfs -o size=$((kb * 3 / 2))k none "$mnt"
  expect_error full_disk "No space left on device" --set checkpoint.dir="$mnt" --set checkpoint.save_interval=5
  grep -qF "$mnt/step_10.tmp/rank0.bin" "$dir/full_disk.out" || fail "full_disk: the file is not named: $(tail -1 "$dir/full_disk.out")"
  [ "$(cat "$mnt/latest")" = step_5 ] || fail "full_disk: latest names '$(cat "$mnt/latest")', not step_5"
  # The failed save removed its partial folder, so the space it took is free again.
  [ ! -e "$mnt/step_10.tmp" ] || fail "full_disk: the failed save left $mnt/step_10.tmp"
  [ "$(du -sk "$mnt" | cut -f1)" -le $((kb * 11 / 10)) ] || fail "full_disk: $(du -sk "$mnt" | cut -f1) KiB still used"
  train full_disk_resume 1 --set checkpoint.dir="$mnt" --resume --steps 6
  umount "$mnt"
else
  echo "mount not permitted here: the read-only and full checkpoint folder cases are skipped"
fi
# One metrics file across a resume: a run of 6 steps saving at 2, 4 and 6, resumed from step_4 to
# step 8 with the same file, leaves each step's line once (1-4 from the first run, 5-8 from the
# resumed one) and the validations up to step 4 of the first.
ck="$dir/ck_metrics"
timeout 120 "$ztrain" train --config "$dir/c.json" --steps 6 --metrics "$dir/one.jsonl" --set train.val_interval=2 \
  --set checkpoint.dir="$ck" --set checkpoint.save_interval=2 > "$dir/one_a.out" 2>&1 || fail "metrics run: $(tail -2 "$dir/one_a.out")"
cp "$dir/one.jsonl" "$dir/one_first.jsonl"
timeout 120 "$ztrain" train --config "$dir/c.json" --steps 8 --metrics "$dir/one.jsonl" --set train.val_interval=2 \
  --set checkpoint.dir="$ck" --resume "$ck/step_4" > "$dir/one_b.out" 2>&1 || fail "metrics resume: $(tail -2 "$dir/one_b.out")"
/usr/bin/python3 - "$dir/one_first.jsonl" "$dir/one.jsonl" <<'PY' || fail "the metrics file does not hold one history across the resume"
import json, sys
first = [json.loads(l) for l in open(sys.argv[1])]
both = [json.loads(l) for l in open(sys.argv[2])]
steps = [r["step"] for r in both if "loss" in r]
vals = [r["step"] for r in both if "val_loss" in r]
assert steps == list(range(1, 9)), steps
assert vals == [2, 4, 6, 8], vals
kept = [r for r in first if r["step"] <= 4]
assert both[:len(kept)] == kept, "the first run's lines up to step 4 changed"
PY

cat "$dir"/rs_*.cmp
finish "checkpoint checks passed"
