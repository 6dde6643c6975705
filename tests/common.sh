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
