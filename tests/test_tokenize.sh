#!/bin/sh
# `ztrain tokenize` against Hugging Face tokenizers (tests/ref/tokenizer_ref.py) loading the same
# tokenizer: identical ids on every file of /usr/share/common-licenses, a multilingual UTF-8 text
# and the same with bytes that are not UTF-8, for GPT-2 (tiktoken file and tokenizer.json),
# SmolLM2 (its GGUF file and tokenizer.json), a Llama-3-style split pattern (uint32 shards), a
# Qwen2-style tokenizer (NFC normalizer), and SentencePiece-style vocabularies (Llama 2's, Mistral's
# and Gemma's forms, with and without byte fallback, tokenizer.json and GGUF).
# Then: the ids do not depend on chunking or threads, the validation split and shard sizes, .jsonl
# documents, and bad input named.
# usage: test_tokenize.sh ZTRAIN PYTHON TOKENIZER_REF GPT2_TIKTOKEN SMOLLM2_GGUF
set -u
ztrain=$1 python=$2 ref=$3 tiktoken=$4 gguf=$5
. "$(dirname "$0")/common.sh"


"$python" "$ref" make "$dir/ref" "$tiktoken" "$gguf" > /dev/null || { echo "FAIL: making the reference tokenizers"; exit 1; }
set -- /usr/share/common-licenses/* "$dir/ref/multilingual.txt" "$dir/ref/invalid.bin"

# check NAME TOKENIZER REFERENCE [tokenize flags]: tokenizes the inputs and compares with tokenizers.
check() {
  name=$1 tok=$2 reference=$3
  shift 3
  "$ztrain" tokenize --tokenizer "$tok" --out "$dir/$name" "$@" /usr/share/common-licenses/* "$dir/ref/multilingual.txt" \
    "$dir/ref/invalid.bin" > "$dir/$name.out" 2>&1 || { fail "$name: tokenize failed: $(cat "$dir/$name.out")"; return; }
  "$python" "$ref" check "$dir/ref/$reference/tokenizer.json" "$dir/$name" "$@" /usr/share/common-licenses/* \
    "$dir/ref/multilingual.txt" "$dir/ref/invalid.bin" || fail "$name: ids differ from tokenizers'"
}
check gpt2_tiktoken "$tiktoken" gpt2_tiktoken
check gpt2_tiktoken_hf "$tiktoken" gpt2
check gpt2_json "$dir/ref/gpt2/tokenizer.json" gpt2
check smollm2_gguf "$gguf" smollm2
check smollm2_json "$dir/ref/smollm2" smollm2
check llama3 "$dir/ref/llama3/tokenizer.json" llama3
check qwen2 "$dir/ref/qwen2" qwen2
# SentencePiece-style BPE (Llama 2, Mistral, Gemma): a vocabulary trained here, as tokenizer.json
# in each family's form and as llama.cpp's GGUF ("llama", merged by scores), against tokenizers.
# Bytes that are not UTF-8 (invalid.bin) are left out: tokenizers cannot take them, and without a
# pre-tokenizer they are not pieces of their own to take apart.
"$python" "$ref" spm "$dir/ref" > /dev/null || fail "making the SentencePiece-style reference tokenizers"
check_spm() {
  name=$1 tok=$2 reference=$3
  "$ztrain" tokenize --tokenizer "$tok" --out "$dir/$name" /usr/share/common-licenses/* "$dir/ref/multilingual.txt" \
    > "$dir/$name.out" 2>&1 || { fail "$name: tokenize failed: $(cat "$dir/$name.out")"; return; }
  "$python" "$ref" check "$dir/ref/$reference/tokenizer.json" "$dir/$name" /usr/share/common-licenses/* \
    "$dir/ref/multilingual.txt" || fail "$name: ids differ from tokenizers'"
}
check_spm spm_bf "$dir/ref/spm_bf/tokenizer.json" spm_bf
check_spm spm_unk "$dir/ref/spm_unk/tokenizer.json" spm_unk
check_spm spm_split "$dir/ref/spm_split/tokenizer.json" spm_split
check_spm spm_first "$dir/ref/spm_first/tokenizer.json" spm_first
check_spm gemma "$dir/ref/gemma/tokenizer.json" gemma
check_spm spm_bf_gguf "$dir/ref/spm_bf.gguf" spm_bf
check_spm spm_unk_gguf "$dir/ref/spm_unk.gguf" spm_unk
check_spm gemma_gguf "$dir/ref/gemma.gguf" gemma
grep -q "shards version 7 (uint32 tokens)" "$dir/llama3.out" || fail "llama3 (65661 tokens) did not write uint32 shards: $(cat "$dir/llama3.out")"
grep -q "shards version 1 (uint16 tokens)" "$dir/gpt2_json.out" || fail "gpt2 did not write uint16 shards: $(cat "$dir/gpt2_json.out")"

# Chunks of ~500 bytes on 3 threads: the same shards, byte for byte.
"$ztrain" tokenize --tokenizer "$dir/ref/llama3/tokenizer.json" --out "$dir/chunked" --chunk-bytes 500 --threads 3 \
  /usr/share/common-licenses/* "$dir/ref/multilingual.txt" "$dir/ref/invalid.bin" > /dev/null 2>&1 || fail "chunked tokenize failed"
cmp -s "$dir/llama3/train_000000.bin" "$dir/chunked/train_000000.bin" || fail "the ids depend on the chunking"

# A validation split of 10% and shards of 20000 tokens: the first 10% of the bytes are val.
"$ztrain" tokenize --tokenizer "$tiktoken" --out "$dir/split" --val-fraction 0.1 --shard-tokens 20000 \
  /usr/share/common-licenses > "$dir/split.out" 2>&1 || fail "split tokenize failed: $(cat "$dir/split.out")"
"$python" - "$dir/split" <<'PY' || fail "the split is wrong: $(cat "$dir/split.out")"
import pathlib, struct, sys
d = pathlib.Path(sys.argv[1])
count = lambda f: struct.unpack("<3i", f.read_bytes()[:12])[2]
val = [count(f) for f in sorted(d.glob("val_*.bin"))]
train = [count(f) for f in sorted(d.glob("train_*.bin"))]
assert len(val) == 1 and len(train) >= 3, (val, train)
assert all(n == 20000 for n in train[:-1]), train
frac = sum(val) / (sum(val) + sum(train))
assert 0.07 < frac < 0.13, frac
PY

# .jsonl: a document per line's "text"; blank lines are skipped.
printf '%s\n' '{"text": "First document.\nTwo lines."}' '' '{"text": "Zweites Dokument: grüße 123"}' '{"text": "<|endoftext|> three"}' > "$dir/docs.jsonl"
"$ztrain" tokenize --tokenizer "$dir/ref/smollm2" --out "$dir/jsonl" "$dir/docs.jsonl" > /dev/null 2>&1 || fail "jsonl tokenize failed"
"$python" "$ref" check "$dir/ref/smollm2/tokenizer.json" "$dir/jsonl" "$dir/docs.jsonl" > /dev/null || fail "jsonl ids differ"

# Pieces hundreds of kilobytes long (a line of base64, a line of one letter): the same ids as
# tokenizers', within a bound the quadratic merge it replaced ([Note: merging in n log n]) broke
# by far (200 KB took 12 s there).
"$python" -c "import base64, os, sys; sys.stdout.write(base64.b64encode(os.urandom(300000)).decode() + '\n')" > "$dir/b64.txt"
printf '%*s\n' 400000 '' | tr ' ' 'q' > "$dir/letters.txt"
timeout 60 "$ztrain" tokenize --tokenizer "$dir/ref/gpt2/tokenizer.json" --out "$dir/long" "$dir/b64.txt" "$dir/letters.txt" \
  > "$dir/long.out" 2>&1 || fail "long pieces: tokenize failed or took over 60 s: $(cat "$dir/long.out")"
"$python" "$ref" check "$dir/ref/gpt2/tokenizer.json" "$dir/long" "$dir/b64.txt" "$dir/letters.txt" > /dev/null ||
  fail "long pieces: ids differ from tokenizers'"

# Bad input, each named.
expect 1 "already holds token shards (train_00000" -- "$ztrain" tokenize --tokenizer "$tiktoken" --out "$dir/split" /usr/share/common-licenses/BSD
expect 1 "$dir/none.json: no such file" -- "$ztrain" tokenize --tokenizer "$dir/none.json" --out "$dir/x" /usr/share/common-licenses/BSD
expect 1 "no file matches '$dir/absent.txt'" -- "$ztrain" tokenize --tokenizer "$tiktoken" --out "$dir/x" "$dir/absent.txt"
expect 2 "--val-fraction must be below 1" -- "$ztrain" tokenize --tokenizer "$tiktoken" --out "$dir/x" --val-fraction 1 /usr/share/common-licenses/BSD
expect 2 "tokenize needs --tokenizer PATH, --out DIR and at least one input" -- "$ztrain" tokenize --tokenizer "$tiktoken" --out "$dir/x"
printf '%s\n' '{"text": "fine"}' 'not json' > "$dir/bad.jsonl"
expect 1 "$dir/bad.jsonl: the line at byte 17 is not a JSON object with a string \"text\"" -- "$ztrain" tokenize --tokenizer "$tiktoken" --out "$dir/y" "$dir/bad.jsonl"
[ -z "$(ls "$dir/y" 2> /dev/null)" ] || fail "a failed tokenize left files: $(ls "$dir/y")"
: > "$dir/empty.txt"
expect 1 "the inputs hold no bytes" -- "$ztrain" tokenize --tokenizer "$tiktoken" --out "$dir/z" "$dir/empty.txt"

# Sampling through the tokenizer a GGUF file carries: --chat renders a user turn with the chatml
# template and stops at <|im_end|>, which is not printed.
out=$("$ztrain" sample --checkpoint "$gguf" --chat true --prompt "What is the capital of France?" --tokens 40 --temperature 0 2>&1) ||
  fail "chat sample failed: $out"
printf '%s' "$out" | grep -q "Paris" || fail "SmolLM2 does not say Paris: $out"
case "$out" in *"<|im_end|>"*|*"<|im_start|>"*) fail "the chat sample printed the template's tokens: $out" ;; esac
[ "$(printf '%s' "$out" | wc -c)" -lt 200 ] || fail "the chat sample did not stop at the end of its turn: $out"
out=$("$ztrain" sample --checkpoint "$gguf" --prompt "The GNU General Public License" --tokens 8 --top-p 0.9 --temperature 0.8 2>&1) ||
  fail "text sample failed: $out"
case "$out" in "The GNU General Public License"?*) ;; *) fail "the text sample does not continue its prompt: $out" ;; esac
expect 2 "--top-p must be in (0, 1], got 0" -- "$ztrain" sample --checkpoint "$gguf" --top-p 0
expect 1 "the tokenizer $tiktoken has 50257 tokens, more than the model's vocabulary of 49152" -- \
  "$ztrain" sample --checkpoint "$gguf" --tokenizer "$tiktoken"
expect 1 "has no <|eot_id|> for the chat template 'llama3'" -- "$ztrain" sample --checkpoint "$gguf" --chat true --chat-template llama3

finish "tokenize: ids identical to tokenizers for GPT-2, SmolLM2 and a Llama-3-style tokenizer; splits, chunks and bad input"
