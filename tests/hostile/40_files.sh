# Other tools' files, exports and tokenized corpora: overlapping or absurd GGUF tensors and keys,
# non-finite weights, a file given where its folder is meant, JSON nested 300,000 deep, a re-export
# over an earlier one, an export over its own inputs, a frozen model gone, interrupted exports and
# tokenize runs, and lines long enough to expose a quadratic tokenizer. Each names the file, key or
# path; what must survive (the base model, a corpus folder) is checked after.
# Sourced by tests/test_hostile.sh ($dir, $ztrain, probe, fail).
fx="$dir/files"
mkdir -p "$fx"
here_files=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# A tiny Llama on bytes, trained 2 steps and exported as a Hugging Face folder: the base model of
# the probes below.
cat > "$fx/llama.json" <<JSON
{"model": {"arch": "llama", "n_layer": 1, "n_head": 2, "n_kv_head": 1, "n_embd": 32, "intermediate_size": 48,
           "vocab_size": 256, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 2, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1}
JSON
"$ztrain" train --config "$fx/llama.json" --set checkpoint.dir="$fx/ck" --set checkpoint.save_interval=2 > "$fx/base.out" 2>&1 &&
  "$ztrain" export --checkpoint "$fx/ck" --format hf --out "$fx/base" >> "$fx/base.out" 2>&1 ||
  fail "files: the base model failed: $(tail -n 3 "$fx/base.out")"
# Runs that start from a file: bytes data gives the vocabulary (256), the file the other dims.
cat > "$fx/from.json" <<JSON
{"model": {"arch": "llama"},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 2, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1}
JSON
llama=(--config "$fx/from.json")
from_refused() {  # from_refused NAME PATTERN FILE: a run starting from FILE ends with status 1 saying PATTERN
  probe "$1" 1 20 "$2" -- "$ztrain" train "${llama[@]}" --init-from "$3"
}

# ---- foreign files: GGUF ------------------------------------------------------------------------
for kind in good overlap vocab blocks nan; do
  /usr/bin/python3 "$here_files/tiny_gguf.py" "$fx/$kind.gguf" "$kind" || fail "files: tiny_gguf.py $kind failed"
done
probe files_gguf_good 0 30 "step +2/2" -- "$ztrain" train "${llama[@]}" --init-from "$fx/good.gguf"
from_refused files_gguf_overlap "gguf '$fx/overlap.gguf': tensor 'blk.0.attn_q.weight' has data offset [0-9]+, expected [0-9]+ .*as llama.cpp requires" \
  "$fx/overlap.gguf"
from_refused files_gguf_vocab "gguf '$fx/vocab.gguf': llama.vocab_size 2147483647 disagrees with token_embd.weight's 256 rows" \
  "$fx/vocab.gguf"
from_refused files_gguf_blocks "gguf '$fx/blocks.gguf': llama.block_count 2147483647 disagrees with the tensors, which hold 1 block \(blk.0 to blk.0\)" \
  "$fx/blocks.gguf"
from_refused files_gguf_nan "'$fx/nan.gguf': tensor 'blk.0.attn_q.weight' holds NaN at element 35: the starting weights are not finite" \
  "$fx/nan.gguf"

# ---- foreign files: Hugging Face folders --------------------------------------------------------
cp -r "$fx/base" "$fx/nan_hf"
/usr/bin/python3 - "$fx/nan_hf/model.safetensors" <<'PY'
import sys
import torch
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
t["model.layers.0.mlp.up_proj.weight"][2, 5] = float("inf")
save_file(t, sys.argv[1], metadata={"format": "pt"})
PY
from_refused files_hf_inf "'$fx/nan_hf/model.safetensors': tensor 'model.layers.0.mlp.up_proj.weight' holds inf at element 69: the starting weights are not finite" \
  "$fx/nan_hf"
from_refused files_hf_file "'$fx/base/model.safetensors' is a safetensors file: give the Hugging Face folder that holds it with its config.json \('$fx/base'\)" \
  "$fx/base/model.safetensors"
from_refused files_hf_config_file "'$fx/base/config.json' is a file of a Hugging Face model folder: give the Hugging Face folder" \
  "$fx/base/config.json"
from_refused files_missing "checkpoint '$fx/absent': cannot open: it does not exist" "$fx/absent"
probe files_sample_missing 1 20 "checkpoint '$fx/absent.gguf': cannot open: it does not exist" -- "$ztrain" sample --checkpoint "$fx/absent.gguf"

# JSON nested 300,000 deep where a reader walks it: an HF config.json's "architectures", a
# safetensors header's "data_offsets", a tokenizer.json's Sequence of pre-tokenizers.
deep=300000
mkdir -p "$fx/deep_config" "$fx/deep_header" "$fx/deep_tok"
{ printf '{"architectures": '; printf '%*s' $deep '' | tr ' ' '['; printf '%*s' $deep '' | tr ' ' ']'; printf '}'; } > "$fx/deep_config/config.json"
cp "$fx/base/model.safetensors" "$fx/deep_config/"
from_refused files_deep_config "'$fx/deep_config/config.json': not valid JSON: arrays or objects nest more than 64 deep" \
  "$fx/deep_config"
cp "$fx/base/config.json" "$fx/deep_header/"
/usr/bin/python3 - "$fx/deep_header/model.safetensors" $deep <<'PY'
import struct, sys
deep = int(sys.argv[2])
header = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": ' + b"[" * deep + b"]" * deep + b"}}"
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header + bytes(8))
PY
from_refused files_deep_header "model.safetensors': header is not valid JSON: arrays or objects nest more than 64 deep" \
  "$fx/deep_header"
/usr/bin/python3 - "$fx/deep_tok/tokenizer.json" 200000 <<'PY'
import sys
deep = int(sys.argv[2])
pre = '{"type": "Sequence", "pretokenizers": [' * deep + '{"type": "ByteLevel"}' + "]}" * deep
open(sys.argv[1], "w").write('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": ' + pre + "}")
PY
probe files_deep_tokenizer 1 20 "tokenizer.json: not a usable tokenizer.json: not valid JSON: arrays or objects nest more than 64 deep" -- \
  "$ztrain" tokenize --tokenizer "$fx/deep_tok/tokenizer.json" --out "$fx/deep_tok/out" /usr/share/common-licenses/BSD

# ---- exports ------------------------------------------------------------------------------------
# An export owns its folder's weights: a single file after a sharded export into the same folder,
# and shards after a single file, leave only the new export's, which ztrain then starts from.
"$ztrain" export --checkpoint "$fx/ck" --format hf --max-shard-size 1KB --out "$fx/re" > "$fx/re1.out" 2>&1 ||
  fail "files: the sharded export failed: $(cat "$fx/re1.out")"
probe files_reexport_single 0 20 "exported" -- "$ztrain" export --checkpoint "$fx/ck" --format hf --out "$fx/re"
[ "$(ls "$fx/re" | tr '\n' ' ')" = "config.json model.safetensors " ] ||
  fail "files_reexport_single: the earlier export's weights remain: $(ls "$fx/re" | tr '\n' ' ')"
probe files_reexport_sharded 0 20 "exported" -- "$ztrain" export --checkpoint "$fx/ck" --format hf --max-shard-size 1KB --out "$fx/re"
{ [ ! -e "$fx/re/model.safetensors" ] && [ -e "$fx/re/model.safetensors.index.json" ]; } ||
  fail "files_reexport_sharded: the earlier single file remains or the index is missing: $(ls "$fx/re" | tr '\n' ' ')"
probe files_reexport_start 0 30 "step +2/2" -- "$ztrain" train "${llama[@]}" --init-from "$fx/re"

# A LoRA run over a copy of the base: an export may not write over the frozen model (or a folder
# holding it), nor over the checkpoint it reads; the frozen model deleted is named.
mkdir -p "$fx/shelf" && cp -r "$fx/base" "$fx/shelf/lbase"
"$ztrain" train "${llama[@]}" --init-from "$fx/shelf/lbase" --set lora.r=2 --set checkpoint.dir="$fx/lck" \
  --set checkpoint.save_interval=2 > "$fx/lora.out" 2>&1 || fail "files: the LoRA run failed: $(tail -n 3 "$fx/lora.out")"
sum_before=$(cat "$fx/shelf/lbase"/* | md5sum)
probe files_merge_over_base 1 20 "export: --out '$fx/shelf/lbase' is or holds the frozen model of this LoRA checkpoint '$fx/shelf/lbase'" -- \
  "$ztrain" export --checkpoint "$fx/lck" --format hf --merge-lora --out "$fx/shelf/lbase"
probe files_merge_over_parent 1 20 "export: --out '$fx/shelf' is or holds the frozen model of this LoRA checkpoint" -- \
  "$ztrain" export --checkpoint "$fx/lck" --format hf --merge-lora --out "$fx/shelf"
probe files_peft_over_base 1 20 "is or holds the frozen model of this LoRA checkpoint" -- \
  "$ztrain" export --checkpoint "$fx/lck" --format peft --out "$fx/shelf/lbase"
probe files_export_over_ckpt 1 20 "is or holds the checkpoint it reads" -- \
  "$ztrain" export --checkpoint "$fx/ck" --format hf --out "$fx"
[ "$(cat "$fx/shelf/lbase"/* | md5sum)" = "$sum_before" ] || fail "files_merge_over_base: the frozen model changed"
probe files_merge_ok 0 20 "exported" -- "$ztrain" export --checkpoint "$fx/lck" --format hf --merge-lora --out "$fx/merged"
# A run's outputs may not be its inputs either: a LoRA run saving its merged model over its base.
probe files_save_over_base 1 20 "train.save_model: '$fx/shelf/lbase/model.safetensors' is or lies in model.init_from \('$fx/shelf/lbase'\), which the run reads" -- \
  "$ztrain" train "${llama[@]}" --init-from "$fx/shelf/lbase" --set lora.r=2 --set train.save_model="$fx/shelf/lbase/model.safetensors"
probe files_metrics_over_data 1 20 "train.metrics: '$fx/data.txt' is a data file of the run, which it reads" -- \
  bash -c 'cp /usr/share/common-licenses/GPL-3 "$1" && "$2" train --config "$3" --train-data "$1" --metrics "$1"' _ "$fx/data.txt" "$ztrain" "$fx/llama.json"
mv "$fx/shelf/lbase" "$fx/lbase_moved"
probe files_merge_base_gone 1 20 "the frozen model its adapters were trained over, '$fx/shelf/lbase' \(the run's model.init_from\), does not exist" -- \
  "$ztrain" export --checkpoint "$fx/lck" --format hf --merge-lora --out "$fx/merged2"

# An export interrupted by Ctrl-C leaves none of its temporary files; a killed export's (SIGKILL
# cannot be handled) are swept by the next export into the folder. A model of 7M parameters in
# shards of 1 MB: its temporary files exist from the start of the export to its end.
cat > "$fx/wide.json" <<JSON
{"model": {"n_layer": 4, "n_head": 6, "n_embd": 384, "max_seq_len": 16},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 16},
 "train": {"steps": 1, "threads": 1, "val_interval": 0}, "train_micro_batch_size_per_gpu": 1}
JSON
"$ztrain" train --config "$fx/wide.json" --set checkpoint.dir="$fx/wck" --set checkpoint.save_interval=1 > "$fx/wide.out" 2>&1 ||
  fail "files: the wide model failed: $(tail -n 3 "$fx/wide.out")"
cat > "$fx/interrupt.sh" <<'SH'
# interrupt.sh SIGNAL FOLDER COUNT -- COMMAND...: runs COMMAND, sends SIGNAL once COUNT temporary
# files of ours are in FOLDER, and prints the exit status and what the folder holds.
sig=$1 folder=$2 count=$3
shift 4
"$@" > /dev/null 2>&1 &
job=$!
for _ in $(seq 4000); do
  [ "$(compgen -G "$folder/*.tmp-*" | wc -l)" -ge "$count" ] && break
  kill -0 $job 2> /dev/null || break
  sleep 0.005
done
kill -"$sig" $job
wait $job
echo "status $? holds [$(ls "$folder" 2> /dev/null | tr '\n' ' ')]"
SH
probe files_export_sigint 0 30 "^status 130 holds \[\]$" -- bash "$fx/interrupt.sh" INT "$fx/wexp" 1 -- \
  "$ztrain" export --checkpoint "$fx/wck" --format hf --max-shard-size 1MB --out "$fx/wexp"
probe files_export_sigkill 0 30 "^status 137 holds \[.*\.tmp-" -- bash "$fx/interrupt.sh" KILL "$fx/wexp" 1 -- \
  "$ztrain" export --checkpoint "$fx/wck" --format hf --max-shard-size 1MB --out "$fx/wexp"
probe files_export_after_kill 0 30 "exported" -- "$ztrain" export --checkpoint "$fx/wck" --format hf --out "$fx/wexp"
[ -z "$(ls "$fx/wexp" | grep '\.tmp-')" ] || fail "files_export_after_kill: the killed export's temporary files remain: $(ls "$fx/wexp" | tr '\n' ' ')"

# ---- tokenize -----------------------------------------------------------------------------------
# A corpus appears whole or not at all: shards of 20,000 tokens from 2.4 MB, stopped by SIGINT or
# SIGKILL once two shards are complete, leave no train_*.bin a loader would read; the next run
# into the folder sweeps the killed one's temporary files and writes the corpus.
for _ in $(seq 10); do cat /usr/share/common-licenses/*; done > "$fx/corpus.txt"
tok=(tokenize --tokenizer /usr/local/share/ztrain/gpt2.tiktoken --shard-tokens 20000 --threads 1)
probe files_tokenize_sigint 0 60 "^status 130 holds \[\]$" -- bash "$fx/interrupt.sh" INT "$fx/toks" 3 -- \
  "$ztrain" "${tok[@]}" --out "$fx/toks" "$fx/corpus.txt"
probe files_tokenize_sigkill 0 60 "^status 137 holds \[[^]]*\.tmp-" -- bash "$fx/interrupt.sh" KILL "$fx/toks" 3 -- \
  "$ztrain" "${tok[@]}" --out "$fx/toks" "$fx/corpus.txt"
grep -q "train_000000.bin \|train_000000.bin\]" "$dir/files_tokenize_sigkill.out" &&
  fail "files_tokenize_sigkill: a killed tokenize left shards a loader reads: $(cat "$dir/files_tokenize_sigkill.out")"
probe files_tokenize_after_kill 0 120 "train_000000.bin" -- "$ztrain" "${tok[@]}" --out "$fx/toks" "$fx/corpus.txt"
[ -z "$(ls "$fx/toks" | grep '\.tmp-')" ] || fail "files_tokenize_after_kill: temporary shards remain: $(ls "$fx/toks" | head -n 3)"

# BPE in n log n ([Note: merging in n log n]): a 1 MB line of base64 and a 2 MB line of letters
# (once 52 s for 400 KB) tokenize within the bound.
/usr/bin/python3 -c "import base64, os, sys; sys.stdout.write(base64.b64encode(os.urandom(750000)).decode() + '\n')" > "$fx/b64.txt"
printf '%*s\n' 2000000 '' | tr ' ' 'q' > "$fx/letters.txt"
probe files_tokenize_long_lines 0 60 "train_000000.bin" -- \
  "$ztrain" tokenize --tokenizer /usr/local/share/ztrain/gpt2.tiktoken --out "$fx/long" "$fx/b64.txt" "$fx/letters.txt"
