# Ranks that stall, die, diverge or disagree: the job ends within train.comm_timeout_s plus a few
# seconds, in both progress modes, naming the setting or the rank; what was saved survives.
# Sourced by tests/test_hostile.sh ($dir, $ztrain, mp, probe, tiny_config, fail).

tiny_config "$dir/ranks.json" '"checkpoint": {"dir": "'"$dir"'/ranks_ck"}'
rk=(--config "$dir/ranks.json")
# Long runs of a model with compute enough that a stopped rank is caught mid-step, where the others
# wait for it in the middle of a collective (the ring reduce-scatter at stage 2).
big=(--set model.n_layer=4 --set model.n_embd=64)
long=("${big[@]}" --steps 100000 --set steps_per_print=50 --set train.comm_timeout_s=3)

# signal_rank.sh SIGNAL WHEN -- COMMAND...: runs the job, sends SIGNAL (STOP, KILL) to its last
# rank once the job's output matches WHEN, and says how long the job took to end after that and
# with what status; the job's lines after the signal carry the seconds since it ("+3.012 "), so a
# slow end shows where the time went. Exits 0 with the job, else 1 (mpirun's own 137 for a
# SIGKILLed rank would read as probe's timeout); a stopped rank is never left behind, nor the job
# when the probe's timeout ends this script.
cat > "$dir/signal_rank.sh" <<'SH'
sig=$1 when=$2
shift 3
out=$(mktemp)
exec {lines}> >(while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done > "$out")
reader=$!
"$@" >&$lines 2>&1 &
job=$!
exec {lines}>&-
victim=
trap 'kill -CONT $victim 2> /dev/null; kill -9 $job $(pgrep -P $job) 2> /dev/null; rm -f "$out"; exit 1' TERM
for _ in $(seq 400); do cut -d' ' -f2- "$out" | grep -qE -- "$when" && break; kill -0 "$job" 2>/dev/null || break; sleep 0.05; done
victim=$(pgrep -P "$job" | tail -n 1)
t0=$EPOCHREALTIME
[ -n "$victim" ] && kill -s "$sig" "$victim" && echo "sent SIG$sig to pid $victim"
wait "$job"
rc=$?
wait "$reader"
awk -v t0="$t0" '{ t = $1; sub(/^[^ ]* /, ""); if (t >= t0) printf "+%.3f %s\n", t - t0, $0; else print }' "$out"
awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "the job ended %.1f s after the signal\n", b - a }'
echo "the job exited $rc"
[ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
rm -f "$out"
[ "$rc" -eq 0 ]
SH

# ended_within NAME SECONDS: the job of probe NAME ended within SECONDS of its signal. With the
# 3 s timeout the jobs end about 3.1 s after it; the bound leaves room for mpirun's teardown on a
# loaded 2-core machine, far below a hang (the probe's limit).
ended_within() {
  local s
  s=$(sed -n 's/^the job ended \([0-9.]*\) s after the signal$/\1/p' "$dir/$1.out")
  echo "$1: the job ended ${s:-?} s after the signal"
  [ -n "$s" ] && awk -v s="$s" -v m="$2" 'BEGIN { exit !(s <= m) }' ||
    fail "$1: the job ended ${s:-?} s after the signal, expected within $2 s: $(grep -v '^step ' "$dir/$1.out" | tail -n 25)"
}

# A rank stopped (SIGSTOP) mid-run: the others' collective times out, in either progress mode, at
# stages whose collectives differ (the ring reduce-scatter at 2, gathers at 3, all-reduce at 0).
for m in poll:2:f32 thread:2:f32 poll:3:bf16 poll:0:f32 thread:3:f32; do
  IFS=: read -r progress stage dt <<< "$m"
  name=ranks_stop_${progress}_s${stage}_$dt
  extra=()
  [ "$dt" = bf16 ] && extra=(--set bf16.enabled=true)
  probe "$name" 1 40 "did not complete within 3000 ms" -- \
    bash "$dir/signal_rank.sh" STOP '^step +50/' -- "${mp[@]}" -np 2 "$ztrain" train "${rk[@]}" "${long[@]}" \
    --set zero_optimization.stage="$stage" --set train.comm_progress="$progress" "${extra[@]}"
  ended_within "$name" 15
done

# Ranks that disagree ([Note: ranks agree on the run]): named at start-up, before any collective
# whose shape depends on the config, exit status 1, in a second or two.
differ() {  # differ NAME PATTERN -- ARGS OF RANK 1 ONLY
  local name=$1 pattern=$2
  shift 3
  probe "$name" 1 30 "$pattern" -- "${mp[@]}" -np 1 "$ztrain" train "${rk[@]}" : -np 1 "$ztrain" train "${rk[@]}" "$@"
}
differ ranks_steps_poll "\[rank [01]\] error: config: train.steps: the ranks disagree: 4 on rank 0, 6 on rank 1" -- \
  --steps 6 --set train.comm_progress=poll
differ ranks_stage "config: zero_optimization.stage: the ranks disagree: 0 on rank 0, 2 on rank 1" -- \
  --set zero_optimization.stage=2
differ ranks_layers "config: model.n_layer: the ranks disagree: 1 on rank 0, 2 on rank 1" -- --set model.n_layer=2
differ ranks_lr "config: optimizer.params.lr: the ranks disagree: 0.0003 on rank 0, 0.001 on rank 1" -- \
  --set optimizer.params.lr=0.001
differ ranks_seed "config: train.seed: the ranks disagree: 1337 on rank 0, 7 on rank 1" -- --seed 7
differ ranks_data "config: data.train: the ranks disagree" -- --train-data /usr/share/common-licenses/GPL-3
differ ranks_ckpt_interval "config: checkpoint.save_interval: the ranks disagree: 0 on rank 0, 1 on rank 1" -- \
  --set checkpoint.save_interval=1
differ ranks_save_model "config: train.save_model: the ranks disagree" -- --set train.save_model="$dir/m.bin"
[ ! -e "$dir/m.bin" ] || fail "ranks_save_model: a model was saved by a job that disagreed"
# Agreed before anything is loaded: a resume folder that does not exist is not what is reported.
differ ranks_resume "config: train.resume: the ranks disagree" -- --resume "$dir/absent_ck"
# Before the NCCL bootstrap (this machine has no GPU: that would fail otherwise).
differ ranks_device "config: train.device: the ranks disagree: \"cpu\" on rank 0, \"cuda\" on rank 1" -- \
  --set train.device='"cuda"'
# Every key agrees unless its row says it is a rank's own ([Note: one declaration per key]): this
# one was left off the hand-kept list there was before.
differ ranks_contiguous "config: zero_optimization.contiguous_gradients: the ranks disagree: true on rank 0, false on rank 1" -- \
  --set zero_optimization.contiguous_gradients=false
probe ranks_three 1 30 "config: bf16.enabled: the ranks disagree: false on ranks 0-1, true on rank 2" -- \
  "${mp[@]}" -np 2 "$ztrain" train "${rk[@]}" : -np 1 "$ztrain" train "${rk[@]}" --set bf16.enabled=true

# What is each rank's own business may differ: the run completes.
probe ranks_local_settings 0 60 "step +4/4" -- "${mp[@]}" \
  -np 1 "$ztrain" train "${rk[@]}" --set train.comm_progress=poll --metrics "$dir/ranks_m.jsonl" : \
  -np 1 "$ztrain" train "${rk[@]}" --set train.comm_progress=thread --set train.comm_timeout_s=60 --set train.threads=2
[ "$(grep -c '"step"' "$dir/ranks_m.jsonl" 2>/dev/null)" = 4 ] || fail "ranks_local_settings: rank 0's metrics lack 4 steps"

# One rank cannot read its config: the job ends naming it.
probe ranks_config_missing 1 30 "\[rank 1\] error: config: cannot read '$dir/absent.json'" -- \
  "${mp[@]}" -np 1 "$ztrain" train "${rk[@]}" : -np 1 "$ztrain" train --config "$dir/absent.json"

# A rank stopped, or killed, while the job saves a checkpoint every step: the job ends within the
# bound, and the checkpoint `latest` names still loads and continues.
for sig in STOP KILL; do
  ck="$dir/ranks_ck_$sig"
  probe "ranks_${sig,,}_saving" 1 40 "the job exited [1-9]" -- bash "$dir/signal_rank.sh" "$sig" '^saved checkpoint .*/step_3 ' -- "${mp[@]}" -np 2 \
    "$ztrain" train "${rk[@]}" "${long[@]}" --set checkpoint.dir="$ck" --set checkpoint.save_interval=1 \
    --set checkpoint.keep_last=2 --set zero_optimization.stage=3
  ended_within "ranks_${sig,,}_saving" 15
  if [ -f "$ck/latest" ]; then
    at=$(sed 's/^step_//; s/\.new$//' "$ck/latest")
    probe "ranks_${sig,,}_resume" 0 60 "resumed from .* at step $at" -- "${mp[@]}" -np 2 "$ztrain" train "${rk[@]}" \
      "${big[@]}" --set checkpoint.dir="$ck" --set zero_optimization.stage=3 --resume --steps $((at + 1))
    grep -qE "^step +$((at + 1))/" "$dir/ranks_${sig,,}_resume.out" || fail "ranks_${sig,,}_resume: no step after resuming"
  else
    fail "ranks_${sig,,}_saving: no checkpoint survived ($(tail -n 3 "$dir/ranks_${sig,,}_saving.out"))"
  fi
done
