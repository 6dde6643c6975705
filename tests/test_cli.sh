#!/bin/sh
# The ztrain command line end to end: usage errors, config errors reaching the user, a short run
# with overrides and metrics, and sampling from the saved model.
# usage: test_cli.sh PATH/TO/ztrain
set -u
ztrain=$1
. "$(dirname "$0")/common.sh"

# expect CODE PATTERN -- command...: exit code and a fixed string in the output.
expect() {
  code=$1 pattern=$2
  shift 3
  out=$("$@" 2>&1)
  got=$?
  [ "$got" -eq "$code" ] || fail "'$*' exited $got, expected $code: $out"
  printf '%s' "$out" | grep -qF -- "$pattern" || fail "'$*' output lacks '$pattern': $out"
}

expect 2 "no command given" -- "$ztrain"
expect 2 "unknown command 'trian'" -- "$ztrain" trian
expect 0 "ztrain train --config FILE" -- "$ztrain" --help
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

finish "all CLI checks passed"
