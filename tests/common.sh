# Sourced by the shell tests: a temporary folder $dir removed on exit (a test that must clean up
# more sets its own trap after sourcing), fail() to count a failed check with its message, and
# finish() to end with the count.
dir=$(mktemp -d "${TMPDIR:-/tmp}/ztrain_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect CODE PATTERN -- command...: exit code and a fixed string in the output.
expect() {
  code=$1 pattern=$2
  shift 3
  out=$("$@" 2>&1)
  got=$?
  [ "$got" -eq "$code" ] || fail "'$*' exited $got, expected $code: $out"
  printf '%s' "$out" | grep -qF -- "$pattern" || fail "'$*' output lacks '$pattern': $out"
}

# finish MESSAGE: exit 1 naming the number of failed checks, else print MESSAGE.
finish() {
  [ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
  echo "$1"
}

# train NAME NP [ztrain train args...]: trains with $dir/c.json, metrics in $dir/NAME.jsonl and
# output in $dir/NAME.out, on NP ranks under $mpirun (one rank: no mpirun at all); a failure or a
# run past 120 s counts as a failed check. ZT_POISON_GRADS, when set, reaches every rank.
train() {
  name=$1 np=$2
  shift 2
  if [ "$np" -eq 1 ]; then
    timeout 120 "$ztrain" train --config "$dir/c.json" --metrics "$dir/$name.jsonl" "$@" > "$dir/$name.out" 2>&1
  else
    timeout 120 "$mpirun" --allow-run-as-root --oversubscribe --bind-to none ${ZT_POISON_GRADS:+-x ZT_POISON_GRADS} \
      -np "$np" "$ztrain" train --config "$dir/c.json" --metrics "$dir/$name.jsonl" "$@" > "$dir/$name.out" 2>&1
  fi || fail "$name failed: $(cat "$dir/$name.out")"
}

# held_model FILE: the model whose per-rank peaks tests/test_estimate.sh holds to `ztrain estimate`
# (6 blocks of 49984 parameters, not a multiple of 3 x 32, so shards are padded at 3 ranks; an
# embedding of 528384 in one unit, a padded vocabulary far above the bytes' 256, so that one block is
# a small part of the gradient peak; a final layernorm of 128; every unit sharded at stage 3), on
# bytes data, 3 steps, one thread a rank.
held_model() {
  cat > "$1" <<JSON
{"model": {"n_layer": 6, "n_head": 4, "n_embd": 64, "vocab_size": 256, "padded_vocab_size": 8192, "max_seq_len": 64,
           "wte_units": 1},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 64},
 "train": {"steps": 3, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 4, "steps_per_print": 1,
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 50000,
                       "reduce_bucket_size": 50000}}
JSON
}
