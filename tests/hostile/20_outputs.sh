# Outputs: what a run and `ztrain export` write (the model, the metrics, the trace, checkpoints),
# and runs that go bad. Each bad path ends before the first step with the key, the path and the
# reason; nothing a run or an export did not own is replaced or lost; a diverging run stops
# before it saves a non-finite state; a checkpoint that does not fit the run is refused at load.
tiny_config "$dir/o.json"
o=("$ztrain" train --config "$dir/o.json")
before_step() {  # before_step NAME: the probe's run ended before its first step
  ! grep -q "step     1/" "$dir/$1.out" || fail "$1: the run trained before failing: $(grep -m1 'step ' "$dir/$1.out")"
}
probe out_base 0 60 "saved checkpoint" -- "${o[@]}" --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=2
cp -r "$dir/ck" "$dir/ck_copy"
same_ck() {  # same_ck NAME: $dir/ck is as out_base left it
  diff -r "$dir/ck" "$dir/ck_copy" > /dev/null || fail "$1: the checkpoint folder changed: $(ls "$dir/ck" | tr '\n' ' ')"
}

# A new run into a folder of another run's checkpoints: refused on every rank before the first
# step, the folder untouched; checkpoint.overwrite lets it, and its first save removes the old ones.
probe ck_reuse_np2 1 60 "checkpoint.dir: '$dir/ck' already holds checkpoints \(step_2, step_4; latest names step_4\).*--resume.*checkpoint.overwrite" \
  -- "${mp[@]}" -np 2 "${o[@]}" --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=2 --set train_micro_batch_size_per_gpu=1
before_step ck_reuse_np2
same_ck ck_reuse_np2
cp -r "$dir/ck" "$dir/ck_over"
probe ck_overwrite 0 60 "replaces step_2, step_4" -- "${o[@]}" --steps 3 --set checkpoint.dir="$dir/ck_over" \
  --set checkpoint.save_interval=2 --set checkpoint.overwrite=true
[ "$(ls "$dir/ck_over" | tr '\n' ' ')" = "latest step_2 step_3 " ] && [ "$(cat "$dir/ck_over/latest")" = step_3 ] ||
  fail "ck_overwrite: left $(ls "$dir/ck_over" | tr '\n' ' '), latest $(cat "$dir/ck_over/latest")"
grep -q '"steps_done": 2' "$dir/ck_over/step_2/meta.json" || fail "ck_overwrite: step_2 is not the new run's"
# What killed saves left (a .tmp folder holding space) goes before the first step of a resume.
mkdir -p "$dir/ck_over/step_9.tmp" && head -c 100000 /dev/zero > "$dir/ck_over/step_9.tmp/rank0.bin"
probe ck_stale_tmp 0 60 "resumed from" -- "${o[@]}" --steps 4 --set checkpoint.dir="$dir/ck_over" \
  --set checkpoint.save_interval=2 --resume
[ ! -e "$dir/ck_over/step_9.tmp" ] || fail "ck_stale_tmp: the stale step_9.tmp is still there"

# Outputs that cannot be written: before the first step, naming key, path and reason.
probe out_model_folder 1 30 "train.save_model: '$dir' is a folder, not a regular file" -- "${o[@]}" --set train.save_model="$dir"
before_step out_model_folder
probe out_metrics_folder 1 30 "train.metrics: '$dir' is a folder" -- "${o[@]}" --metrics "$dir"
probe out_trace_folder 1 30 "train.trace: '$dir' is a folder" -- "${o[@]}" --trace "$dir"
echo x > "$dir/plain"
probe out_model_under_file 1 30 "train.save_model: cannot create the folder '$dir/plain'" -- "${o[@]}" \
  --set train.save_model="$dir/plain/m.bin"
probe out_ckdir_file 1 30 "checkpoint.dir: cannot create '$dir/plain'" -- "${o[@]}" --set checkpoint.dir="$dir/plain" \
  --set checkpoint.save_interval=2
probe out_same_file 1 30 "train.metrics: '$dir/same' is also train.trace" -- "${o[@]}" --metrics "$dir/same" --trace "$dir/same"
probe out_model_in_ck 1 30 "train.save_model: '$dir/ck/step_4/rank0.bin' lies inside the checkpoint folder" \
  -- "${o[@]}" --steps 6 --set checkpoint.dir="$dir/ck" --resume --set train.save_model="$dir/ck/step_4/rank0.bin"
probe out_metrics_latest 1 30 "train.metrics: '$dir/ck/latest' lies inside the checkpoint this run resumes from" \
  -- "${o[@]}" --steps 6 --set checkpoint.dir="$dir/ck_other" --resume "$dir/ck" --metrics "$dir/ck/latest"
same_ck out_model_in_ck
# A folder that is missing is made; a symbolic link is followed, not replaced.
probe out_model_new_dir 0 60 "saved model to" -- "${o[@]}" --steps 1 --set train.save_model="$dir/new/deeper/m.bin" \
  --metrics "$dir/new/m.jsonl"
[ -s "$dir/new/deeper/m.bin" ] && [ -s "$dir/new/m.jsonl" ] || fail "out_model_new_dir: the model or metrics was not written"
ln -s "$dir/new/deeper/m.bin" "$dir/link.bin"
cp "$dir/new/deeper/m.bin" "$dir/m1.bin"
probe out_model_link 0 60 "saved model to" -- "${o[@]}" --steps 2 --set train.save_model="$dir/link.bin"
[ -L "$dir/link.bin" ] && ! cmp -s "$dir/new/deeper/m.bin" "$dir/m1.bin" ||
  fail "out_model_link: the link was replaced, or the file it names was not"
# A device node as output (our own, in $dir: never /dev's): refused, and it stays a device.
if mknod "$dir/full" c 1 7 2>/dev/null; then
  probe out_model_device 1 30 "train.save_model: '$dir/full' is a character device" -- "${o[@]}" --set train.save_model="$dir/full"
  before_step out_model_device
  probe export_device 1 30 "export --out: '$dir/full' is a character device" -- "$ztrain" export --checkpoint "$dir/ck" \
    --format llmc --out "$dir/full"
  [ -c "$dir/full" ] || fail "export_device: $dir/full is no longer a character device"
fi
mkfifo "$dir/fifo"
probe export_fifo 1 30 "is a FIFO" -- "$ztrain" export --checkpoint "$dir/ck" --format safetensors --out "$dir/fifo"
[ -p "$dir/fifo" ] || fail "export_fifo: the FIFO was replaced"
# export must not write into the checkpoint it reads (nor its root's latest).
probe export_own_input 1 30 "export: --out '$dir/ck/step_4/rank0.bin' lies inside the checkpoint it reads" \
  -- "$ztrain" export --checkpoint "$dir/ck" --format llmc --out "$dir/ck/step_4/rank0.bin"
probe export_latest 1 30 "lies inside the checkpoint it reads" -- "$ztrain" export --checkpoint "$dir/ck/step_4" \
  --format llmc --out "$dir/ck/latest"
same_ck export_own_input
# A file that happens to have the old temporary name survives an export beside it.
echo mine > "$dir/e.bin.tmp"
probe export_beside 0 30 "exported" -- "$ztrain" export --checkpoint "$dir/ck" --format llmc --out "$dir/e.bin"
[ "$(cat "$dir/e.bin.tmp")" = mine ] && [ -z "$(ls "$dir" | grep 'e.bin.tmp-')" ] || fail "export_beside: temporary files clobbered or left"

# Read-only places (where mount is permitted here): refused before the first step, on every rank.
mkdir -p "$dir/ro"
if mount -t tmpfs -o ro none "$dir/ro" 2>/dev/null; then
  probe out_model_ro_np2 1 60 "train.save_model: cannot create '$dir/ro/m.bin.tmp-[0-9]+-0': Read-only file system" \
    -- "${mp[@]}" -np 2 "${o[@]}" --set train.save_model="$dir/ro/m.bin" --set train_micro_batch_size_per_gpu=1
  before_step out_model_ro_np2
  probe out_metrics_ro 1 30 "train.metrics: cannot create '$dir/ro/m.jsonl': Read-only file system" -- "${o[@]}" --metrics "$dir/ro/m.jsonl"
  probe out_trace_ro 1 30 "train.trace: cannot create .*Read-only file system" -- "${o[@]}" --trace "$dir/ro/t.json"
  probe out_ckdir_ro 1 30 "checkpoint.dir: cannot create '$dir/ro/\.write-check-rank0-[0-9]+': Read-only file system" \
    -- "${o[@]}" --set checkpoint.dir="$dir/ro" --set checkpoint.save_interval=2
  before_step out_ckdir_ro
  probe export_ro 1 30 "export --out: cannot create .*Read-only file system" -- "$ztrain" export --checkpoint "$dir/ck" \
    --format llmc --out "$dir/ro/e.bin"
  umount "$dir/ro"
fi

# Runs that go bad: a NaN loss stops the run naming the step, before its update and before any
# save, so keep_last never pushes the good checkpoints out; skipped steps are bounded.
cp -r "$dir/ck" "$dir/ck_nan"
# (lr 1e30 keeps step 5's loss finite and makes weights of 1e30, saved as step_5; step 6 is NaN.)
probe nan_stop_np2 1 60 "step 6: loss NaN, gradient norm .*stops before this step's update; the newest checkpoint is .*step_5" \
  -- "${mp[@]}" -np 2 "${o[@]}" --steps 9 --set checkpoint.dir="$dir/ck_nan" --resume --set checkpoint.save_interval=1 \
  --set checkpoint.keep_last=2 --set optimizer.params.lr=1e30 --set train_micro_batch_size_per_gpu=1
[ "$(ls "$dir/ck_nan" | tr '\n' ' ')" = "latest step_2 step_4 step_5 " ] ||
  fail "nan_stop_np2: the checkpoints moved: $(ls "$dir/ck_nan" | tr '\n' ' ') latest $(cat "$dir/ck_nan/latest")"
probe nan_skip_bounded 1 60 "step 4: loss NaN.*3 such steps in a row, more than train.skip_nonfinite_steps 2" \
  -- "${o[@]}" --steps 9 --set optimizer.params.lr=1e30 --set train.skip_nonfinite_steps=2
grep -q "step     3/9 .*non-finite: step skipped" "$dir/nan_skip_bounded.out" || fail "nan_skip_bounded: step 3 not reported skipped"
# An update that overflows the state (finite loss and norm) is never saved.
probe inf_state_save 1 60 "checkpoint: step_1 is not saved: on rank 0, unit .* holds inf or NaN" \
  -- "${o[@]}" --set optimizer.params.lr=1e38 --set checkpoint.dir="$dir/ck_inf" --set checkpoint.save_interval=1
[ -z "$(ls "$dir/ck_inf")" ] || fail "inf_state_save: left $(ls "$dir/ck_inf" | tr '\n' ' ')"

# Checkpoints that do not fit the run: refused at load, naming what differs.
edited() {  # edited NAME SED: a copy of $dir/ck/step_4 with meta.json edited
  rm -rf "$dir/$1" && cp -r "$dir/ck/step_4" "$dir/$1" && sed -i "$2" "$dir/$1/meta.json"
}
edited ck_embd 's/"n_embd": 32/"n_embd": 16/'
probe load_units 1 30 "unit 0 is embedding of [0-9]+ elements, but the model of its dimensions .* has embedding of [0-9]+.*do not match" \
  -- "${o[@]}" --steps 6 --resume "$dir/ck_embd" --set model.n_embd=16 --set model.wte_units=1
probe export_units 1 30 "its units do not match its model" -- "$ztrain" export --checkpoint "$dir/ck_embd" --format llmc --out "$dir/x.bin"
edited ck_neg 's/"steps_done": 4/"steps_done": -4/'
probe load_negative_step 1 30 "position.steps_done must be an integer in \[0, 2147483647\], got -4" \
  -- "${o[@]}" --steps 6 --resume "$dir/ck_neg"
edited ck_huge 's/"steps_done": 4/"steps_done": 4294967300/'
probe load_huge_step 1 30 "position.steps_done must be an integer" -- "${o[@]}" --steps 6 --resume "$dir/ck_huge"
edited ck_updates 's/"updates_done": 4/"updates_done": 7/'
probe load_updates 1 30 "position.updates_done must be an integer in \[0, 4\], got 7" -- "${o[@]}" --steps 6 --resume "$dir/ck_updates"
edited ck_scale 's/"loss_scale": 1.0/"loss_scale": -1.0/'
probe load_scale 1 30 "position.loss_scale must be a positive finite number" -- "${o[@]}" --steps 6 --resume "$dir/ck_scale"
# Resume checks: the global batch and seq_len the data position follows from; --steps behind it.
probe resume_batch_np2 1 60 "saved with a global batch of 2 sequences \(micro 2 x accumulation 1 x 1 ranks\), this run's is 4" \
  -- "${mp[@]}" -np 2 "${o[@]}" --steps 6 --resume "$dir/ck"
probe resume_seq_len 1 30 "saved with data.seq_len 32, this run's is 16" -- "${o[@]}" --steps 6 --resume "$dir/ck" --set data.seq_len=16
probe resume_steps_below 1 30 "train.steps: 3 is below the step of the checkpoint .* \(4\)" -- "${o[@]}" --steps 3 --resume "$dir/ck"
probe resume_steps_equal 0 30 "warning: the checkpoint is at train.steps \(4\) already: nothing left to train" -- "${o[@]}" --steps 4 --resume "$dir/ck" \
  --set train.save_model="$dir/eq.bin"
[ -s "$dir/eq.bin" ] || fail "resume_steps_equal: the model was not written"
probe resume_other_world 0 60 "resumed from" -- "${mp[@]}" -np 2 "${o[@]}" --steps 6 --resume "$dir/ck" \
  --set train_micro_batch_size_per_gpu=1
same_ck resume_checks
