#!/usr/bin/env bash
# A job in which one rank fails, stalls or diverges must end, non-zero, soon, naming the rank,
# instead of hanging ([Note: failing the job] in comm/process_group.hpp), whichever way
# collectives progress: each mode runs with the progress thread and polled (ZT_MPI_PROGRESS=poll).
# Runs comm_failure under mpirun with 3 ranks (every rank all-reduces and reduce-scatters, f32 and
# bf16, with a 2 s timeout):
#   throw:   rank 1 throws at iteration 50            -> "[rank 1]" and the error in the output
#   hang:    rank 1 stops calling collectives         -> the others time out: "did not complete"
#   diverge: rank 1 ends early, as with fewer steps   -> the others time out, rank 1 at the end
#   kill:    rank 2 is SIGKILLed after ~2 s            -> mpirun ends the rest
#   stop:    rank 2 is SIGSTOPped after ~2 s           -> the others time out: "did not complete"
#   end:     rank 2 stops itself after its last collective -> the others do not wait for it at
#            MPI_Finalize: "did not reach the end of the run" ([Note: ending together])
# Each run must exit non-zero within 30 s (a healthy run takes 20 s and more), and leave no rank
# behind. Every mpirun is bounded by `timeout 60`, so this test cannot hang.
# usage: test_comm_failure.sh MPIRUN COMM_FAILURE_EXE
set -u
mpirun=$1
exe=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ztrain_comm_failure.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
now_ms() { date +%s%3N; }

# The ranks' processes must be gone once mpirun returned (a few seconds' grace).
check_no_rank_left() {
  local mode=$1 dir=$2 f pid left
  for _ in $(seq 50); do
    left=""
    for f in "$dir"/pid.[0-9]*; do
      [ -f "$f" ] || continue
      pid=$(cat "$f")
      kill -0 "$pid" 2>/dev/null && left="$left ${f##*/}=$pid"
    done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "$mode: ranks still running 5 s after mpirun returned:$left"
  for f in "$dir"/pid.[0-9]*; do kill -9 "$(cat "$f")" 2>/dev/null; done  # ours; do not leak them
}

# run_mode MODE PROGRESS: sets rc, ms and out.
run_mode() {
  local mode=$1 progress=$2 name="$1/$2" dir="$work/$1-$2" t0 job pid
  local launch=(timeout -k 5 60 "$mpirun" --allow-run-as-root --oversubscribe --bind-to none
                -x ZT_MPI_PROGRESS="$progress" -np 3)
  mkdir -p "$dir"
  t0=$(now_ms)
  if [ "$mode" = kill ] || [ "$mode" = stop ]; then
    "${launch[@]}" "$exe" "$mode" "$dir" >"$dir/out" 2>&1 &
    job=$!
    for _ in $(seq 300); do [ -s "$dir/pid.2" ] && break; sleep 0.1; done
    if [ -s "$dir/pid.2" ]; then
      sleep 2
      pid=$(cat "$dir/pid.2")
      echo "$name: SIG${mode/kill/KILL} to rank 2 (pid $pid) at $(( $(now_ms) - t0 )) ms"
      if [ "$mode" = kill ]; then kill -9 "$pid"; else kill -STOP "$pid"; fi
    else
      echo "$name: rank 2 never wrote $dir/pid.2"
    fi
    wait "$job"
    rc=$?
  else
    "${launch[@]}" "$exe" "$mode" "$dir" >"$dir/out" 2>&1
    rc=$?
  fi
  ms=$(( $(now_ms) - t0 ))
  out=$(cat "$dir/out")
  echo "== $name: exit status $rc after $ms ms; output:"
  printf '%s\n' "$out" | sed 's/^/  | /'
  [ "$rc" -ne 0 ] || fail "$name: the job exited 0"
  # 124: `timeout` ended it (137 alone is no sign of that: mpirun itself exits 128+9 for a SIGKILLed rank).
  [ "$rc" -ne 124 ] && [ "$ms" -lt 59000 ] || fail "$name: the job did not end within 60 s (ended by timeout)"
  [ "$ms" -lt 30000 ] || fail "$name: the job took $ms ms, more than 30 s"
  if printf '%s' "$out" | grep -q "finished 2000 iterations"; then fail "$name: a rank ran to the end"; fi
  check_no_rank_left "$name" "$dir"
}

expect_output() {  # NAME TEXT
  printf '%s' "$out" | grep -qF -- "$2" || fail "$1: the output lacks '$2'"
}

for progress in thread poll; do
  run_mode throw $progress
  expect_output throw/$progress "[rank 1] error: injected failure on rank 1"
  run_mode hang $progress
  expect_output hang/$progress "reduce_scatter of 1000 f32 did not complete"
  run_mode diverge $progress
  expect_output diverge/$progress "reduce_scatter of 1000 f32 did not complete"
  run_mode kill $progress
  run_mode stop $progress
  expect_output stop/$progress "did not complete"
  run_mode end $progress
  expect_output end/$progress "did not reach the end of the run within 2000 ms"
done

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all failure modes ended the job"
