#!/bin/bash
# The hostile user: a broad set of realistic bad inputs (configs, data, checkpoints, output paths,
# signals, ranks that disagree or stall), each of which must end with a clear message, the right
# exit status, within a bound, and with nothing lost. The probes live by area in tests/hostile/*.sh,
# sourced here in name order; each calls `probe` (below) and checks what must survive itself.
# usage: test_hostile.sh MPIRUN ZTRAIN
set -u
mpirun=$1 ztrain=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
mp=("$mpirun" --allow-run-as-root --oversubscribe --bind-to none)
probes=0

# probe NAME STATUS SECONDS PATTERN -- COMMAND...
#   Runs COMMAND (a program or a shell function) with its output in $dir/NAME.out. The check fails
#   unless it ends within SECONDS (a hang is the worst outcome: its whole process group is killed
#   and the hang reported), exits with STATUS (a number, or "!0" for any failure) and prints a line
#   matching the extended regular expression PATTERN. Leaves the elapsed seconds in $probe_s.
probe() {
  local name=$1 want=$2 limit=$3 pattern=$4
  shift 5
  probes=$((probes + 1))
  local t0=$EPOCHREALTIME got hung=0
  # Job control gives the command a process group of its own, so a hang's mpirun and ranks go too.
  set -m
  "$@" > "$dir/$name.out" 2>&1 < /dev/null &
  local pid=$!
  set +m
  local deadline=$(( ${t0%.*} + limit ))
  while kill -0 "$pid" 2> /dev/null; do
    if [ "${EPOCHREALTIME%.*}" -ge "$deadline" ]; then
      hung=1
      kill -TERM -- "-$pid" 2> /dev/null
      sleep 5
      kill -KILL -- "-$pid" 2> /dev/null
      break
    fi
    sleep 0.1
  done
  wait "$pid"
  got=$?
  probe_s=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if [ "$hung" -eq 1 ]; then
    fail "$name: still running after $limit s (a hang): $(tail -n 5 "$dir/$name.out")"
    return
  fi
  if [ "$want" = "!0" ]; then
    [ "$got" -ne 0 ] || fail "$name: exited 0, expected a failure: $(tail -n 5 "$dir/$name.out")"
  else
    [ "$got" -eq "$want" ] || fail "$name: exited $got, expected $want: $(tail -n 5 "$dir/$name.out")"
  fi
  grep -qE -- "$pattern" "$dir/$name.out" || fail "$name: no line matches '$pattern': $(tail -n 5 "$dir/$name.out")"
}

# tiny_config FILE [extra JSON members]: a 1-layer byte-level GPT-2 on the license texts, small
# enough that a probe's run takes a second or two.
tiny_config() {
  local file=$1 extra=${2:-}
  cat > "$file" <<JSON
{"model": {"n_layer": 1, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 4, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1${extra:+, $extra}}
JSON
}

for area in "$here"/hostile/*.sh; do
  [ -e "$area" ] || continue
  . "$area"
done

finish "hostile: $probes probes passed"
