#!/bin/sh
# ztrain under mpirun: two ranks with micro-batch 4 train exactly as one rank with micro-batch 8
# (same global batch), only rank 0 prints progress, and an error ends the whole job naming a rank.
# usage: test_launch.sh MPIRUN ZTRAIN
set -u
mpirun=$1 ztrain=$2
here=$(dirname "$0")
. "$here/common.sh"
launch() { timeout 120 "$mpirun" --allow-run-as-root --oversubscribe --bind-to none "$@"; }

cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 8, "threads": 1, "val_interval": 4, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 4, "steps_per_print": 1,
 "optimizer": {"params": {"lr": 0.002}}}
JSON

launch -np 2 "$ztrain" train --config "$dir/c.json" --metrics "$dir/np2.jsonl" > "$dir/np2.out" 2>&1 ||
  fail "np=2 run failed: $(cat "$dir/np2.out")"
"$ztrain" train --config "$dir/c.json" --set train_micro_batch_size_per_gpu=8 --metrics "$dir/np1.jsonl" \
  > "$dir/np1.out" 2>&1 || fail "np=1 run failed: $(cat "$dir/np1.out")"

/usr/bin/python3 "$here/compare_metrics.py" "$dir/np1.jsonl" "$dir/np2.jsonl" --lines $((8 + 2)) ||
  fail "losses of np=2 differ from np=1"
[ "$(grep -c '^step .*/8 |' "$dir/np2.out")" -eq 8 ] || fail "expected 8 progress lines (rank 0 only): $(cat "$dir/np2.out")"
grep -q "2 ranks (mpi, 2 on this host)" "$dir/np2.out" || fail "banner does not show 2 MPI ranks: $(cat "$dir/np2.out")"

# A batch-size mismatch every rank sees: the job ends non-zero, naming the rank and the numbers.
launch -np 2 "$ztrain" train --config "$dir/c.json" --set train_batch_size=4 > "$dir/bad.out" 2>&1 &&
  fail "mismatched train_batch_size should fail"
grep -q "\[rank [01]\] error: config: train_batch_size: 4 != " "$dir/bad.out" ||
  fail "no rank-prefixed batch-size error: $(cat "$dir/bad.out")"
# Both ranks fail at once; each error is one whole line, never interleaved with the other rank's
# ("[rank 0] [rank 1] error: error: ..."), however slow the machine (the sanitizer build).
grep "error:" "$dir/bad.out" | grep -v "^\[rank [01]\] error: config: train_batch_size: 4 != [^[]*\$" &&
  fail "error lines interleaved: $(cat "$dir/bad.out")"

# The cause, made visible where strace can trace: each line leaves a rank in one write(2).
if command -v strace > /dev/null && strace -f -o /dev/null true 2> /dev/null; then
  launch -np 2 strace -f -ff -qq -s 4096 -e trace=write -e signal=none -o "$dir/writes" \
    "$ztrain" train --config "$dir/c.json" --set train_batch_size=4 > "$dir/bad_traced.out" 2>&1
  whole=$(cat "$dir"/writes.* | grep -cE '^write\(2, "\[rank [01]\] error: config: train_batch_size: 4 != [^"]*\\n", ')
  pieces=$(cat "$dir"/writes.* | grep -E '^write\(2, "(\[rank|error)' | grep -cvE '^write\(2, "\[rank [01]\] error: [^"]*\\n", ')
  [ "$whole" -ge 1 ] && [ "$pieces" -eq 0 ] ||
    fail "an error line left a rank in pieces ($whole whole, $pieces other writes to stderr): $(grep -h '^write(2' "$dir"/writes.*)"
else
  echo "skipped the one-write check: strace cannot trace here"
fi

finish "launch checks passed"
