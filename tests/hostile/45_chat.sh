# Chat data: a set with no trained target, a global batch without one, a handful of conversations
# without validation, an answer of a megabyte, and ranks that render the data differently. A
# loss is never reported for targets that are not there.
# Sourced by tests/test_hostile.sh ($dir, $ztrain, mp, probe, fail).
ch="$dir/chat"
mkdir -p "$ch"
smollm2=/usr/local/share/ztrain/SmolLM2-135M-Instruct.Q4_1.gguf
chat_config() {  # chat_config FILE DATA [extra data members]
  cat > "$1" <<JSON
{"model": {"arch": "llama", "n_layer": 1, "n_head": 2, "n_kv_head": 1, "n_embd": 32, "intermediate_size": 48,
           "vocab_size": 49152, "max_seq_len": 64},
 "data": {"format": "chat", "train": "$2", "seq_len": 64, "tokenizer": "$smollm2"${3:+, $3}},
 "train": {"steps": 3, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 1, "steps_per_print": 1}
JSON
}
/usr/bin/python3 - "$ch" <<'PY'
import base64, json, os, sys
d = sys.argv[1]
def conv(system, q, a):
    return json.dumps({"messages": [{"role": "system", "content": system}, {"role": "user", "content": q},
                                    {"role": "assistant", "content": a}]})
long_system = "Read every word of this long preamble carefully. " * 20  # far past a row of 64 tokens
# Every answer lies past its row: nothing to train on.
open(f"{d}/no_targets.jsonl", "w").write("\n".join(conv(long_system, f"Question {i}?", f"Answer {i}.") for i in range(8)) + "\n")
# The first packed row is one such conversation cut to the row; the others train.
rows = [conv(long_system, "First?", "First.")] + [conv("Be brief.", f"What is {i} plus {i}?", str(2 * i)) for i in range(12)]
open(f"{d}/first_empty.jsonl", "w").write("\n".join(rows) + "\n")
# Five conversations: too few to hold any out, enough to train on.
open(f"{d}/five.jsonl", "w").write("\n".join(conv("Be brief.", f"Say {i}.", str(i)) for i in range(5)) + "\n")
# A megabyte of base64 in one answer, beside short conversations.
blob = base64.b64encode(os.urandom(750000)).decode()
open(f"{d}/big_answer.jsonl", "w").write("\n".join([conv("Be brief.", "Encode it.", blob)] + rows[1:]) + "\n")
PY

chat_config "$ch/none.json" "$ch/no_targets.jsonl" '"packing": true'
probe chat_no_targets 1 30 "train chat data '$ch/no_targets.jsonl': no target is trained in any row: every assistant answer falls past data.seq_len 64 tokens" -- \
  "$ztrain" train --config "$ch/none.json"
chat_config "$ch/first.json" "$ch/first_empty.jsonl" '"packing": true'
probe chat_batch_no_targets 0 30 "step +1/3 \| loss nan .* no trained target in the global batch \(every target -1\): step skipped" -- \
  "$ztrain" train --config "$ch/first.json" --metrics "$ch/first.jsonl"
/usr/bin/python3 - "$ch/first.jsonl" <<'PY' || fail "chat_batch_no_targets: the metrics (above)"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[0]["loss"] is None and lines[0]["no_targets"] and lines[0]["skipped"], lines[0]
assert all(l["loss"] > 0 and "no_targets" not in l for l in lines[1:]), lines[1:]
PY
chat_config "$ch/five.json" "$ch/five.jsonl"
probe chat_five_no_val 0 30 "step +3/3 \| loss [0-9]" -- "$ztrain" train --config "$ch/five.json"
probe chat_five_val 1 30 "val chat data '$ch/five.jsonl' holds no usable conversation" -- \
  "$ztrain" train --config "$ch/five.json" --set train.val_interval=2
chat_config "$ch/big.json" "$ch/big_answer.jsonl" '"packing": true'
probe chat_big_answer 0 60 "1 conversations cut to a row" -- "$ztrain" train --config "$ch/big.json"
probe chat_big_answer_unpacked 0 60 "1 longer than a row without data.packing" -- \
  "$ztrain" train --config "$ch/big.json" --set data.packing=false
# Ranks that render the data differently disagree by name (runtime/agreement.cpp).
probe chat_ranks_packing 1 30 "config: data.packing: the ranks disagree: true on rank 0, false on rank 1" -- \
  "${mp[@]}" -np 1 "$ztrain" train --config "$ch/first.json" : -np 1 "$ztrain" train --config "$ch/first.json" --set data.packing=false
probe chat_ranks_system 1 30 "config: data.system: the ranks disagree" -- \
  "${mp[@]}" -np 1 "$ztrain" train --config "$ch/first.json" : -np 1 "$ztrain" train --config "$ch/first.json" --set data.system=Hi
