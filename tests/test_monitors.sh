#!/bin/bash
# DeepSpeed's tensorboard and csv_monitor sections ([Note: monitor scalars] in
# runtime/train/monitor.hpp, [Note: event files] in runtime/train/tensorboard_file.hpp), read back by
# the tensorboard package's EventAccumulator and Python's csv (tests/ref/check_monitors.py): on 2
# ranks with fp16 (a loss scale, and skipped steps), every scalar equals the metrics lines; a run
# resumed from an earlier checkpoint continues the same curves with each step once; the files of a
# run killed with SIGKILL load, and a resume after a torn tail still has each step once. `ztrain
# train --plot` draws a PNG from the metrics.
# usage: test_monitors.sh MPIRUN ZTRAIN PYTHON
set -u
mpirun=$1 ztrain=$2 py=$3
here=$(dirname "$0")
. "$here/common.sh"
"$py" -c "import tensorboard" 2> /dev/null || { echo "FAIL: tensorboard is not installed for $py (scripts/install-deps.sh)"; exit 1; }
check() {  # check NAME METRICS [--prefix]: the files of $dir/tb/job and $dir/csv/DeepSpeedJobName against METRICS
  local name=$1 metrics=$2
  shift 2
  "$py" "$here/ref/check_monitors.py" "$metrics" "$dir/tb/job" "$dir/csv/DeepSpeedJobName" "$sps" "$@" > "$dir/$name.check" 2>&1 ||
    fail "$name: $(cat "$dir/$name.check")"
}

# csv_monitor without a job_name: DeepSpeed's default folder, DeepSpeedJobName. Disabled wandb and
# comet sections, as DeepSpeed configs carry them, are accepted.
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32, "val_fraction": 0.1},
 "train": {"steps": 10, "threads": 1, "val_interval": 3, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 3, "steps_per_print": 1,
 "fp16": {"enabled": true, "initial_scale_power": 24, "hysteresis": 1},
 "tensorboard": {"enabled": true, "output_path": "$dir/tb", "job_name": "job"},
 "csv_monitor": {"enabled": true, "output_path": "$dir/csv"},
 "wandb": {"enabled": false, "project": "p"}, "comet": {"enabled": false}}
JSON
sps=6  # samples a step: 3 a micro-batch on 2 ranks

train full 2 --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=5 --plot "$dir/full.png"
grep -q '"skipped":true' "$dir/full.jsonl" || fail "full: no step was skipped: skipped_steps is untested"
grep -q '"val_loss"' "$dir/full.jsonl" || fail "full: no validation line"
check full "$dir/full.jsonl"
[ "$(ls "$dir/tb/job" | grep -c '^events.out.tfevents.')" = 1 ] || fail "full: event files: $(ls "$dir/tb/job")"
[ "$(head -c 8 "$dir/full.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || fail "full: --plot wrote no PNG"
grep -q "plotted $dir/full.jsonl to $dir/full.png" "$dir/full.out" || fail "full: no 'plotted' line"

# Resumed from step 5 of the 10 done: steps 6-10 run again and replace the first attempt's, in the
# same event file; the curves hold each step once and equal the metrics file, which holds the
# whole history too.
cp "$dir/full.jsonl" "$dir/resumed.jsonl"
train resumed 2 --metrics "$dir/resumed.jsonl" --resume "$dir/ck/step_5"
check resumed "$dir/resumed.jsonl"
[ "$(ls "$dir/tb/job" | grep -c '^events.out.tfevents.')" = 1 ] || fail "resumed: a second event file: $(ls "$dir/tb/job")"

# A run killed with SIGKILL mid-training: its files load, ending at most one step short of its
# metrics. Then a torn tail (the event file cut inside its last record, a CSV file inside its last
# row) and a resume from the last checkpoint: each step once again.
rm -rf "$dir/tb" "$dir/csv" "$dir/ck"
"$ztrain" train --config "$dir/c.json" --metrics "$dir/killed.jsonl" --steps 100000 --set train.val_interval=0 \
  --set fp16.enabled=false --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=10 > "$dir/killed.out" 2>&1 &
pid=$!
for _ in $(seq 600); do
  [ "$(cat "$dir/killed.jsonl" 2> /dev/null | grep -c '"loss"')" -ge 45 ] && break
  sleep 0.1
done
kill -KILL "$pid"
wait "$pid" 2> /dev/null
sps=3
check killed "$dir/killed.jsonl" --prefix
events=$(ls "$dir"/tb/job/events.out.tfevents.*)
truncate -s -7 "$events"
printf '999' >> "$dir/csv/DeepSpeedJobName/Train_Samples_lr.csv"
last=$(cat "$dir/ck/latest")
"$py" - "$dir/killed.jsonl" "${last#step_}" <<'PY'  # the metrics file a resume from that checkpoint keeps
import json, sys
lines = [l for l in open(sys.argv[1]) if json.loads(l)["step"] <= int(sys.argv[2])]
open(sys.argv[1], "w").writelines(lines)
PY
train killed_resumed 1 --metrics "$dir/killed.jsonl" --steps $(( ${last#step_} + 5 )) --set train.val_interval=0 \
  --set fp16.enabled=false --set checkpoint.dir="$dir/ck" --resume
check killed_resumed "$dir/killed.jsonl"

# --plot needs the metrics it draws from.
expect 2 "train --plot draws the curves from the metrics file: give train.metrics too" -- "$ztrain" train \
  --config "$dir/c.json" --plot "$dir/x.png"
finish "monitors: every scalar of a run, a resumed run and a killed run equal to its metrics lines ($(cat "$dir/full.check"))"
