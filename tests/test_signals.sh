#!/bin/bash
# SIGTERM, SIGINT and SIGHUP during an offload run ([Note: ending on a signal]): the run ends
# within seconds by that signal (status 128 + N for one process; mpirun, which passes a Ctrl-C
# on to its ranks as SIGTERM, ends non-zero), says so, and leaves nothing under nvme_path. A run
# saving a checkpoint every step, stopped at several moments, leaves `latest` naming a complete
# checkpoint that resumes.
# usage: test_signals.sh MPIRUN ZTRAIN
set -u
mpirun=$1 ztrain=$2
. "$(dirname "$0")/common.sh"
mp=("$mpirun" --allow-run-as-root --oversubscribe --bind-to none)
nv="$dir/nvme"
mkdir -p "$nv"
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 100000, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 100000,
 "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "$nv"},
                       "offload_param": {"device": "nvme", "nvme_path": "$nv", "max_in_cpu": 0}}}
JSON

# start NAME NP [args]: a run in the background ($pid), on NP ranks under mpirun (1: no mpirun),
# with SIGINT's default action, as a run started from a terminal has it (a script's background
# commands otherwise ignore it).
start() {
  local name=$1 np=$2
  shift 2
  if [ "$np" -eq 1 ]; then
    env --default-signal=INT "$ztrain" train --config "$dir/c.json" "$@" > "$dir/$name.out" 2>&1 &
  else
    env --default-signal=INT "${mp[@]}" -np "$np" "$ztrain" train --config "$dir/c.json" "$@" > "$dir/$name.out" 2>&1 &
  fi
  pid=$!
}

# ended NAME: waits up to 30 s for $pid to end ($status: its exit status); a run still going is a
# hang, killed and reported.
ended() {
  local name=$1
  for _ in $(seq 300); do
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2> /dev/null; then
    fail "$name: still running 30 s after the signal: $(tail -n 3 "$dir/$name.out")"
    kill -9 "$pid" 2> /dev/null
  fi
  wait "$pid"
  status=$?
}

# no_scratch NAME: nothing is left under nvme_path.
no_scratch() {
  local left
  left=$(find "$nv" -mindepth 1)
  [ -z "$left" ] || fail "$1: left behind under nvme_path: $left"
  rm -rf "${nv:?}"/*
}

# stop NAME NP SIGNAL STATUS MESSAGE: once every rank's two swap files exist, SIGNAL goes to the
# run (to mpirun under mpirun); it must end with STATUS ("!0": any failure) and print MESSAGE.
stop() {
  local name=$1 np=$2 sig=$3 want=$4 message=$5
  start "$name" "$np"
  for _ in $(seq 300); do
    [ "$(find "$nv" -name '*.swp' | wc -l)" -ge $((2 * np)) ] && break
    sleep 0.1
  done
  [ "$(find "$nv" -name '*.swp' | wc -l)" -ge $((2 * np)) ] || fail "$name: no swap files after 30 s: $(tail -n 3 "$dir/$name.out")"
  kill -"$sig" "$pid"
  ended "$name"
  if [ "$want" = "!0" ]; then
    [ "$status" -ne 0 ] || fail "$name: exited 0 after SIG$sig"
  else
    [ "$status" -eq "$want" ] || fail "$name: exited $status after SIG$sig, expected $want: $(tail -n 3 "$dir/$name.out")"
  fi
  grep -q "$message" "$dir/$name.out" || fail "$name: no line '$message': $(tail -n 3 "$dir/$name.out")"
  no_scratch "$name"
}

stop term_np1 1 TERM 143 "ztrain: stopped by SIGTERM; its temporary files were removed"
stop int_np1 1 INT 130 "ztrain: stopped by SIGINT; its temporary files were removed"
stop hup_np1 1 HUP 129 "ztrain: stopped by SIGHUP; its temporary files were removed"
# A Ctrl-C on mpirun reaches every rank as SIGTERM.
stop int_np2 2 INT '!0' "\[rank 1\] ztrain: stopped by SIGTERM; its temporary files were removed"
stop term_np2 2 TERM '!0' "\[rank 0\] ztrain: stopped by SIGTERM; its temporary files were removed"

# Saving every step, stopped at several moments after the first saves: `latest` names a complete
# checkpoint (meta.json and every rank file), which resumes, with offload, and leaves no swap file.
ck="$dir/ck"
for delay in 0 0.2; do
  for np in 1 2; do
    name="ckpt_np${np}_$delay"
    rm -rf "$ck"
    start "$name" "$np" --set checkpoint.dir="$ck" --set checkpoint.save_interval=1 --set checkpoint.keep_last=2
    for _ in $(seq 300); do
      [ -e "$ck/step_2" ] && break
      sleep 0.1
    done
    sleep "$delay"
    kill -TERM "$pid"
    ended "$name"
    [ "$status" -ne 0 ] || fail "$name: exited 0 after SIGTERM"
    no_scratch "$name"
    latest=$(cat "$ck/latest" 2> /dev/null)
    step=${latest#step_}
    if [ -z "$latest" ] || [ ! -s "$ck/$latest/meta.json" ] || [ ! -s "$ck/$latest/rank$((np - 1)).bin" ]; then
      fail "$name: latest ('$latest') does not name a complete checkpoint: $(ls -R "$ck" 2>&1 | head -n 20)"
      continue
    fi
    if [ "$np" -eq 1 ]; then
      timeout 60 "$ztrain" train --config "$dir/c.json" --resume "$ck" --steps $((step + 2)) > "$dir/$name.resume" 2>&1
    else
      timeout 60 "${mp[@]}" -np "$np" "$ztrain" train --config "$dir/c.json" --resume "$ck" --steps $((step + 2)) \
        > "$dir/$name.resume" 2>&1
    fi || fail "$name: resuming from $latest failed: $(tail -n 3 "$dir/$name.resume")"
    grep -q "resumed from $ck at step $step" "$dir/$name.resume" || fail "$name: did not resume at step $step: $(tail -n 3 "$dir/$name.resume")"
    no_scratch "$name resumed"
  done
done

finish "signals: every run ended by its signal with nothing left under nvme_path, every checkpoint resumed"
