#!/usr/bin/env bash
# The tokenizer's encode rate against Hugging Face tokenizers, in the same run on the same
# documents: single-thread MB/s of each (bench/tokenizer_bench, tests/ref/tokenizer_ref.py bench;
# each document encoded on its own, best of three passes) for GPT-2, SmolLM2 and a Llama-3-style
# tokenizer, on English text (/usr/share/common-licenses, 8 copies) and on a multilingual text
# (scripts, emoji, digits, whitespace runs; 400 copies), and on long lines (a 1 MB line of base64
# and a 2 MB line of random letters: one piece each, where a quadratic merge shows); then `ztrain
# tokenize`'s whole-command rate (files to shards) on 1 thread and on every core.
#   [CORPORA="english multilingual long"] bench/tokenizer_bench.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ref=tests/ref/tokenizer_ref.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The references' tokenizers: Debian's Python (the tests' tokenizers) and the peers' venv (a newer
# release), where present.
pythons=(/usr/bin/python3)
[ -x "$HOME/.cache/ztrain-peers/bin/python" ] && pythons+=("$HOME/.cache/ztrain-peers/bin/python")

/usr/bin/python3 "$ref" make "$work/ref" /usr/local/share/ztrain/gpt2.tiktoken \
  /usr/local/share/ztrain/SmolLM2-135M-Instruct.Q4_1.gguf > /dev/null
corpora=(${CORPORA:-english multilingual long})
mkdir -p "$work/english" "$work/multilingual" "$work/long"
for k in 1 2 3 4 5 6 7 8; do
  for f in /usr/share/common-licenses/*; do [ -L "$f" ] || cp "$f" "$work/english/$(basename "$f").$k"; done
done
for k in $(seq 400); do cp "$work/ref/multilingual.txt" "$work/multilingual/$k.txt"; done
/usr/bin/python3 -c "import base64, random, sys
random.seed(1)
open(sys.argv[1], 'w').write(base64.b64encode(random.randbytes(750000)).decode() + '\\n')
open(sys.argv[2], 'w').write(''.join(random.choices('abcdefghijklmnopqrstuvwxyz', k=2000000)) + '\\n')" \
  "$work/long/base64.txt" "$work/long/letters.txt"

echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%F)"
printf '%-8s %-13s %-34s %10s %10s %7s\n' tokenizer corpus reference "HF MB/s" "ztrain MB/s" ratio
for name in gpt2 smollm2 llama3; do
  for corpus in "${corpora[@]}"; do
    zt=$("$build/bench/tokenizer_bench" "$work/ref/$name/tokenizer.json" "$work/$corpus"/* | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['mb_per_s'])")
    for py in "${pythons[@]}"; do
      version=$("$py" -c "import tokenizers; print(tokenizers.__version__)")
      hf=$("$py" "$ref" bench "$work/ref/$name/tokenizer.json" "$work/$corpus"/* | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['mb_per_s'])")
      printf '%-8s %-13s %-34s %10.2f %10.2f %6.1fx\n' "$name" "$corpus" "tokenizers $version" "$hf" "$zt" \
        "$(/usr/bin/python3 -c "print($zt / $hf)")"
    done
  done
done

echo
echo "ztrain tokenize (files to uint16 shards, GPT-2 tiktoken), English and multilingual corpora together:"
for threads in 1 "$(nproc)"; do
  rm -rf "$work/out"
  "$build/ztrain" tokenize --tokenizer /usr/local/share/ztrain/gpt2.tiktoken --out "$work/out" --threads "$threads" \
    --chunk-bytes 65536 "$work/english" "$work/multilingual" | head -1
done
