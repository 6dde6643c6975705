#!/bin/sh
# Chat data (data.format "chat") under real mpirun on a tiny Llama with SmolLM2's tokenizer:
# conversations of different lengths put different numbers of trained targets on each rank and
# micro-batch, and the loss and the gradient are still the mean over the global batch's trained
# targets: np 2 and 3, ZeRO stages 0 and 3 and gradient accumulation follow one rank within the
# ZeRO tolerance, padded and packed; bad lines are counted with file:line, and bad setups named.
# usage: test_chat.sh MPIRUN ZTRAIN PYTHON TOKENIZER
set -u
mpirun=$1 ztrain=$2 python=$3 tokenizer=$4
. "$(dirname "$0")/common.sh"

"$python" - "$dir/chat.jsonl" <<'PY'
import json, random, sys
random.seed(3)
rows = []
for i in range(192):
    a, b = random.randint(1, 999), random.randint(1, 999)
    pad = " ".join(["please"] * random.randint(0, 12))  # lengths differ, so do the trained shares
    k = i % 3
    if k == 0:
        rows.append({"messages": [{"role": "system", "content": "Answer briefly."},
                                  {"role": "user", "content": f"{pad} what is {a} plus {b}?"},
                                  {"role": "assistant", "content": f"{a} plus {b} is {a + b}."}]})
    elif k == 1:
        rows.append({"query": f"Multiply {a} by {b}. {pad}", "response": f"The product is {a * b}.",
                     "history": [["Ready?", "Yes."]]})
    else:
        rows.append({"instruction": "Subtract the numbers.", "input": f"{a} - {b} {pad}", "output": str(a - b)})
lines = [json.dumps(r) for r in rows]
lines[4:4] = ["not json", json.dumps({"messages": [{"role": "user", "content": "hi"}]})]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY

cat > "$dir/c.json" <<JSON
{"model": {"arch": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 32, "intermediate_size": 48,
           "vocab_size": 49152, "max_seq_len": 96},
 "data": {"format": "chat", "train": "$dir/chat.jsonl", "seq_len": 96, "tokenizer": "$tokenizer", "shuffle": true,
          "val_fraction": 0.25},
 "train": {"steps": 6, "threads": 1, "val_interval": 3, "val_batches": 1},
 "train_micro_batch_size_per_gpu": 12, "steps_per_print": 1, "optimizer": {"params": {"lr": 0.003}},
 "zero_optimization": {"stage3_prefetch_bucket_size": 9000, "reduce_bucket_size": 9000}}
JSON

# compare NAME REF: every step's loss and gradient norm and every val loss within 1e-5 (relative).
compare() {
  "$python" - "$dir/$2.jsonl" "$dir/$1.jsonl" <<'PY' || fail "$1 differs from $2 (see above)"
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b), (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    for k in ("loss", "grad_norm", "val_loss"):
        if k in x:
            worst = max(worst, abs(x[k] - y[k]) / max(abs(x[k]), 1e-6))
print(f"{sys.argv[2]}: worst relative difference {worst:.2e}")
sys.exit(0 if worst <= 1e-5 else 1)
PY
}

for packing in false true; do
  p="--set data.packing=$packing"
  train "ref_$packing" 1 $p
  grep -q "2 bad lines skipped (1 no assistant turn, 1 not JSON; first ones: $dir/chat.jsonl:5: not JSON; $dir/chat.jsonl:6: no assistant turn)" "$dir/ref_$packing.out" ||
    fail "the bad lines are not reported: $(cat "$dir/ref_$packing.out")"
  train "np2_$packing" 2 $p --set train_micro_batch_size_per_gpu=6
  compare "np2_$packing" "ref_$packing"
  train "np3_s3_$packing" 3 $p --set train_micro_batch_size_per_gpu=4 --set zero_optimization.stage=3
  compare "np3_s3_$packing" "ref_$packing"
  train "np2_s3_acc_$packing" 2 $p --set train_micro_batch_size_per_gpu=2 --set gradient_accumulation_steps=3 \
    --set train.val_batches=3 \
    --set zero_optimization.stage=3
  compare "np2_s3_acc_$packing" "ref_$packing"
done
grep -q "(packed)" "$dir/ref_true.out" || fail "packing is not reported: $(cat "$dir/ref_true.out")"
"$python" - "$dir/ref_false.jsonl" <<'PY' || fail "chat training does not learn"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l["loss"] for l in lines if "loss" in l]
sys.exit(0 if steps[-1] < steps[0] else 1)
PY

# A checkpoint records the tokenizer its run trained through: ztrain sample finds it.
train ck 1 --steps 2 --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=2
out=$("$ztrain" sample --checkpoint "$dir/ck" --chat true --prompt "What is 2 plus 2?" --tokens 4 --temperature 0 2>&1) ||
  fail "sample from the chat checkpoint without --tokenizer: $out"
grep -q "\"tokenizer\": \"$tokenizer\"" "$dir/ck/step_2/meta.json" || fail "the checkpoint does not record its tokenizer"

# Bad setups, each named.
expect 1 "no usable conversation" -- "$ztrain" train --config "$dir/c.json" --train-data /usr/share/common-licenses/BSD
expect 1 "config: data.chat_template: unknown chat template 'alpaca'" -- "$ztrain" train --config "$dir/c.json" --set data.chat_template=alpaca
expect 1 "ends turns with <|eot_id|>, which the tokenizer" -- "$ztrain" train --config "$dir/c.json" --set data.chat_template=llama3
expect 1 "config: data: tokenizer, chat_template, packing and system apply to data.format \"chat\" only" -- \
  "$ztrain" train --config "$dir/c.json" --set data.format=bytes --set model.vocab_size=256
expect 1 "more than the model's vocabulary (model.vocab_size 1000)" -- "$ztrain" train --config "$dir/c.json" --set model.vocab_size=1000
expect 1 "too few for one global batch" -- "$ztrain" train --config "$dir/c.json" --set train_micro_batch_size_per_gpu=200
"$python" -c "import json; print(json.dumps({'messages': [{'role': 'user', 'content': 'x ' * 300}, {'role': 'assistant', 'content': 'y'}]}))" > "$dir/long.jsonl"
expect 1 "longer than a row without data.packing" -- "$ztrain" train --config "$dir/c.json" --train-data "$dir/long.jsonl"

finish "chat data: masked mean over the global batch at np 1-3, stages 0 and 3, accumulation, padded and packed"
