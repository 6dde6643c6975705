#!/bin/sh
# The ztrain command line end to end: usage errors, config errors reaching the user, a short run
# with overrides and metrics, and sampling from the saved model.
# usage: test_cli.sh PATH/TO/ztrain
set -u
ztrain=$1
. "$(dirname "$0")/common.sh"

expect 2 "no command given" -- "$ztrain"
expect 2 "unknown command 'trian'" -- "$ztrain" trian
expect 0 "usage: ztrain COMMAND [FLAGS]" -- "$ztrain" --help
expect 0 "ztrain 0.1.0" -- "$ztrain" --version
# Each command's own help, through CLI11 (runtime/cli/commands.hpp): every flag with its type, a
# line of meaning and its default, and the way to the configuration's keys.
for cmd in train sample estimate simulate bench export tokenize config; do
  expect 0 "Usage: ztrain $cmd [OPTIONS]" -- "$ztrain" $cmd --help
  expect 0 "The configuration's keys: ztrain config --list" -- "$ztrain" help $cmd
done
expect 0 "--steps N                   train.steps: optimizer steps, 1 to 2147483647" -- "$ztrain" train --help
expect 0 "--max-shard-size SIZE       hf: split the weights into files of at most SIZE (5GB, 500MB, bytes) (default: 5GB)" -- \
  "$ztrain" export -h
expect 0 "--tokens N                  the most tokens to generate, 0 to 2147483647 (default: 200)" -- "$ztrain" help sample
expect 2 "unknown command 'trainn'" -- "$ztrain" help trainn
expect 2 "unknown argument '--bogus'" -- "$ztrain" train --config x.json --bogus 1
expect 2 "unknown argument 'stray'" -- "$ztrain" estimate --config x.json stray
expect 2 "--config needs a value" -- "$ztrain" estimate --config
# The configuration's keys, as the reader takes them (test_config checks the reader takes each).
expect 0 "zero_optimization.stage                                      integer       default 0" -- "$ztrain" config --list
expect 0 "zero_optimization.cpu_offload                                refused (not implemented)" -- "$ztrain" config --list
expect 2 "config needs --list" -- "$ztrain" config
expect 2 "train needs --config FILE" -- "$ztrain" train
expect 2 "--steps expects an integer, got 'ten'" -- "$ztrain" train --config x.json --steps ten
expect 1 "cannot read '$dir/none.json'" -- "$ztrain" train --config "$dir/none.json"

cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 1, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 4, "val_interval": 2, "val_batches": 2, "save_model": "$dir/m.bin"},
 "train_micro_batch_size_per_gpu": 4, "steps_per_print": 2}
JSON
expect 1 "config: model.n_layers: unknown key" -- "$ztrain" train --config "$dir/c.json" --set model.n_layers=2
expect 1 "config: zero_optimization.stage: must be 0, 1, 2 or 3, got 5" -- "$ztrain" train --config "$dir/c.json" --set zero_optimization.stage=5
expect 1 "config: train.steps: expected an integer" -- "$ztrain" train --config "$dir/c.json" --set train.steps='"x"'
expect 1 "no file matches" -- "$ztrain" train --config "$dir/c.json" --set data.format=llmc --set train.val_interval=0 --train-data "$dir/nothing_*.bin"
expect 1 "cannot open" -- "$ztrain" train --config "$dir/c.json" --init-from "$dir/absent.bin"
# train.device cuda where no GPU is seen: one clear line naming the missing device, not a crash.
if ! nvidia-smi -L > /dev/null 2>&1; then
  expect 1 "needs a CUDA device" -- "$ztrain" train --config "$dir/c.json" --set train.device='"cuda"'
fi

expect 0 "step     3/3" -- "$ztrain" train --config "$dir/c.json" --steps 3 --seed 9 --metrics "$dir/m.jsonl" --set optimizer.params.lr=0.001
[ "$(grep -c '"loss"' "$dir/m.jsonl")" -eq 3 ] || fail "metrics file should hold 3 step lines: $(cat "$dir/m.jsonl")"
grep -q '"lr":0.001' "$dir/m.jsonl" || fail "--set optimizer.params.lr did not reach the run"
[ -s "$dir/m.bin" ] || fail "train.save_model was not written"

out=$("$ztrain" sample --checkpoint "$dir/m.bin" --prompt "GNU" --tokens 40 --seed 3) || fail "sample failed: $out"
[ "$(printf '%s' "$out" | head -c 3)" = "GNU" ] || fail "sample output does not start with the prompt: $out"
[ "$(printf '%s' "$out" | wc -c)" -ge 40 ] || fail "sample printed fewer than 40 bytes: $out"
expect 1 "checkpoint '$dir/none.bin': cannot open" -- "$ztrain" sample --checkpoint "$dir/none.bin"

# Every number a flag takes is checked whole and in range, as a usage error naming the flag.
expect 2 "--temperature expects a number, got 'abc'" -- "$ztrain" sample --checkpoint "$dir/m.bin" --temperature abc
expect 2 "--temperature must be a finite number >= 0, got -1" -- "$ztrain" sample --checkpoint "$dir/m.bin" --temperature -1
expect 2 "--temperature must be a finite number >= 0, got nan" -- "$ztrain" sample --checkpoint "$dir/m.bin" --temperature nan
expect 2 "--temperature must be a finite number >= 0, got inf" -- "$ztrain" sample --checkpoint "$dir/m.bin" --temperature inf
expect 2 "--tokens must be in [0, 2147483647], got 4294967301" -- "$ztrain" sample --checkpoint "$dir/m.bin" --tokens 4294967301
expect 2 "--tokens must be in [0, 2147483647], got -5" -- "$ztrain" sample --checkpoint "$dir/m.bin" --tokens -5
expect 2 "--tokens expects an integer, got '5 '" -- "$ztrain" sample --checkpoint "$dir/m.bin" --tokens "5 "
expect 2 "--top-k must be in [1, 2147483647], got 99999999999999999999" -- "$ztrain" sample --checkpoint "$dir/m.bin" --top-k 99999999999999999999
expect 2 "--seed expects an integer in [0, 18446744073709551615], got '-1'" -- "$ztrain" sample --checkpoint "$dir/m.bin" --seed -1
expect 2 "--steps must be in [1, 2147483647], got 4294967301" -- "$ztrain" train --config "$dir/c.json" --steps 4294967301
expect 2 "--seed expects an integer in [0, 18446744073709551615], got '18446744073709551616'" -- "$ztrain" train --config "$dir/c.json" --seed 18446744073709551616
expect 2 "--world-size must be in [1, 16777216], got 4294967297" -- "$ztrain" estimate --config "$dir/c.json" --world-size 4294967297
# Temperature 0 is greedy: the same text whatever the seed.
t0a=$("$ztrain" sample --checkpoint "$dir/m.bin" --prompt "GNU" --tokens 20 --temperature 0 --seed 1)
t0b=$("$ztrain" sample --checkpoint "$dir/m.bin" --prompt "GNU" --tokens 20 --temperature 0 --seed 2)
[ -n "$t0a" ] && [ "$t0a" = "$t0b" ] || fail "--temperature 0 is not greedy: '$t0a' vs '$t0b'"

# The sample streams: each token is written (and flushed) as it is generated, so text shows up in a
# file long before a sample of 2^31 - 1 tokens could end.
"$ztrain" sample --checkpoint "$dir/m.bin" --prompt "GNU" --tokens 2147483647 > "$dir/stream.txt" 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ "$(wc -c < "$dir/stream.txt")" -ge 100 ] && break
  sleep 0.1
done
[ "$(wc -c < "$dir/stream.txt")" -ge 100 ] || fail "sample printed nothing in 10 s (it does not stream): $(cat "$dir/stream.txt")"
kill "$pid" 2> /dev/null
wait "$pid" 2> /dev/null

# A ztrain checkpoint (a step folder, or the root naming its latest) is read for sampling and for
# --init-from through its fp32 master weights, whatever wte_units it was saved with; a folder that
# is not a checkpoint says so.
expect 1 "checkpoint '$dir' is a folder, but neither a ztrain checkpoint" -- "$ztrain" sample --checkpoint "$dir"
expect 1 "checkpoint '$dir' is a folder, but neither a ztrain checkpoint" -- "$ztrain" train --config "$dir/c.json" --init-from "$dir"
"$ztrain" train --config "$dir/c.json" --steps 3 --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=3 \
  --set model.wte_units=2 --set train.save_model="$dir/ck.bin" > "$dir/ck.out" 2>&1 || fail "checkpointed run failed: $(cat "$dir/ck.out")"
want=$("$ztrain" sample --checkpoint "$dir/ck.bin" --prompt "GNU" --tokens 30 --seed 5)
for from in "$dir/ck" "$dir/ck/step_3"; do
  got=$("$ztrain" sample --checkpoint "$from" --prompt "GNU" --tokens 30 --seed 5 2>&1) || fail "sample from $from failed: $got"
  [ "$got" = "$want" ] || fail "sample from $from differs from the saved model's: '$got' vs '$want'"
done
for from in "$dir/ck.bin" "$dir/ck"; do
  "$ztrain" train --config "$dir/c.json" --steps 2 --init-from "$from" --metrics "$dir/init_$(basename "$from").jsonl" \
    > "$dir/init.out" 2>&1 || fail "--init-from $from failed: $(cat "$dir/init.out")"
done
losses() { grep -o '"grad_norm":[^,]*,"loss":[^,]*' "$1"; }
[ -n "$(losses "$dir/init_ck.jsonl")" ] && [ "$(losses "$dir/init_ck.bin.jsonl")" = "$(losses "$dir/init_ck.jsonl")" ] ||
  fail "--init-from a checkpoint folder trains otherwise than from the same weights in llm.c's format: $(cat "$dir/init_ck.bin.jsonl" "$dir/init_ck.jsonl")"
expect 1 "disagrees with 1 in the checkpoint '$dir/ck'" -- "$ztrain" train --config "$dir/c.json" --init-from "$dir/ck" --set model.n_layer=2

# More validation batches than the data holds: validation covers it once and says so, rather than
# wrapping around and counting some batches twice.
"$ztrain" train --config "$dir/c.json" --steps 2 --set train.val_batches=100000 --metrics "$dir/vb_all.jsonl" \
  > "$dir/vb.out" 2>&1 || fail "train.val_batches 100000 failed: $(cat "$dir/vb.out")"
held=$(sed -n 's/.*is more than the \([0-9]*\) batches the validation data holds.*/\1/p' "$dir/vb.out")
if [ -z "$held" ]; then
  fail "train.val_batches beyond the validation data gave no warning: $(cat "$dir/vb.out")"
else
  "$ztrain" train --config "$dir/c.json" --steps 2 --set train.val_batches="$held" --metrics "$dir/vb_held.jsonl" \
    > "$dir/vb.out" 2>&1 || fail "train.val_batches $held failed: $(cat "$dir/vb.out")"
  [ "$(grep val_loss "$dir/vb_all.jsonl")" = "$(grep val_loss "$dir/vb_held.jsonl")" ] ||
    fail "train.val_batches 100000 validates otherwise than the $held batches the data holds"
fi

finish "all CLI checks passed"
