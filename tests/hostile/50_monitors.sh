# DeepSpeed's monitors (runtime/train/monitor.hpp): the sections that need a network service are
# refused by name when enabled; a monitor folder that cannot be written ends the run before its
# first step, naming the section and the folder; a folder that is or lies in what the run reads or
# ztrain manages is refused; an event file that is not one (garbage where a resume continues) or a
# folder in a tag file's place ends the run with the path, and nothing is lost.
tiny_config "$dir/mon.json"
m=("$ztrain" train --config "$dir/mon.json")
probe mon_wandb 1 20 "config: wandb.enabled: is DeepSpeed's Weights & Biases monitor, which sends to a network service" \
  -- "${m[@]}" --set wandb.enabled=true
probe mon_comet 1 20 "config: comet.enabled: is DeepSpeed's Comet monitor" -- "${m[@]}" --set comet.enabled=true --set comet.project='"p"'
probe mon_wandb_not_object 1 20 "config: wandb: expected an object, got true" -- "${m[@]}" --set wandb=true
probe mon_typo 1 20 "config: tensorboard.enable: unknown key \(did you mean 'enabled'\?\)" -- "${m[@]}" --set tensorboard.enable=true
probe mon_no_folder 1 20 "config: tensorboard.job_name: and output_path are both empty" -- "${m[@]}" \
  --set tensorboard.enabled=true --set tensorboard.job_name='""'
echo x > "$dir/mon_file"
probe mon_folder_is_file 1 30 "tensorboard: cannot create the folder '$dir/mon_file/job': Not a directory" \
  -- "${m[@]}" --set tensorboard.enabled=true --set tensorboard.output_path="$dir/mon_file" --set tensorboard.job_name=job
before_step mon_folder_is_file
probe mon_job_is_file 1 30 "csv_monitor: the folder '$dir/mon_file' \(output_path/job_name\) is a file; name a folder" \
  -- "${m[@]}" --set csv_monitor.enabled=true --set csv_monitor.output_path="$dir" --set csv_monitor.job_name=mon_file
before_step mon_job_is_file
[ "$(cat "$dir/mon_file")" = x ] || fail "mon_job_is_file: the file was changed"
mkdir -p "$dir/mon_ro" && chmod 500 "$dir/mon_ro"
if ! touch "$dir/mon_ro/w" 2> /dev/null; then  # root writes anywhere: the check only runs where it cannot
  probe mon_read_only 1 30 "csv_monitor: .*'$dir/mon_ro" -- "${m[@]}" --set csv_monitor.enabled=true \
    --set csv_monitor.output_path="$dir/mon_ro"
fi
rm -f "$dir/mon_ro/w"
probe mon_in_ck 1 30 "tensorboard: the folder '$dir/ck/step_4/tb' \(output_path/job_name\) lies inside the checkpoint folder" \
  -- "${m[@]}" --steps 6 --set checkpoint.dir="$dir/ck" --resume --set tensorboard.enabled=true \
  --set tensorboard.output_path="$dir/ck/step_4" --set tensorboard.job_name=tb
same_ck mon_in_ck
# A file of the event files' pattern that is garbage (not the run's) where a resume would continue:
# the run stops naming it, and it is left as it was.
cp -r "$dir/ck_copy" "$dir/mon_ck"
mkdir -p "$dir/mon_tb/job"
head -c 1000 /dev/urandom > "$dir/mon_tb/job/events.out.tfevents.9999999999.host.1"
cp "$dir/mon_tb/job/events.out.tfevents.9999999999.host.1" "$dir/mon_garbage"
probe mon_garbage_events 1 60 "tensorboard: '$dir/mon_tb/job/events.out.tfevents.9999999999.host.1' is not a TensorBoard event file" \
  -- "${m[@]}" --steps 6 --set checkpoint.dir="$dir/mon_ck" --resume \
  --set tensorboard.enabled=true --set tensorboard.output_path="$dir/mon_tb" --set tensorboard.job_name=job
cmp -s "$dir/mon_tb/job/events.out.tfevents.9999999999.host.1" "$dir/mon_garbage" || fail "mon_garbage_events: the file was changed"
# A folder where a tag's CSV file goes: the run stops naming it.
mkdir -p "$dir/mon_csv/DeepSpeedJobName/Train_Samples_lr.csv"
probe mon_csv_folder 1 30 "csv_monitor: .*Train_Samples_lr.csv" -- "${m[@]}" --set csv_monitor.enabled=true \
  --set csv_monitor.output_path="$dir/mon_csv"
