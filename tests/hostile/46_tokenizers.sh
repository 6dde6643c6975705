# SentencePiece-style tokenizer files that cannot work: an unknown normalizer or pre-tokenizer,
# byte_fallback without the <0xNN> tokens, a GGUF "llama" vocabulary whose scores do not match its
# tokens. Each is named by `ztrain tokenize`, never a crash.
# Sourced by tests/test_hostile.sh ($dir, $ztrain, probe, fail).
tk="$dir/tokenizers"
mkdir -p "$tk"
/usr/bin/python3 - "$tk" <<'PY'
import json, sys
import gguf
d = sys.argv[1]
sp = "\u2581"
vocab = {"<unk>": 0, "</s>": 1, "a": 2, "b": 3, sp: 4, sp + "a": 5}
def tokenizer(normalizer, pre, byte_fallback=False):
    return {"version": "1.0", "added_tokens": [{"id": 1, "content": "</s>", "special": True}], "normalizer": normalizer,
            "pre_tokenizer": pre, "model": {"type": "BPE", "vocab": vocab, "merges": [[sp, "a"]], "unk_token": "<unk>",
                                            "fuse_unk": True, "byte_fallback": byte_fallback}}
replace = {"type": "Replace", "pattern": {"String": " "}, "content": sp}
json.dump(tokenizer({"type": "Lowercase"}, None), open(f"{d}/normalizer.json", "w"))
json.dump(tokenizer(replace, {"type": "UnicodeScripts"}), open(f"{d}/pre.json", "w"))
json.dump(tokenizer(replace, None, byte_fallback=True), open(f"{d}/bytes.json", "w"))
w = gguf.GGUFWriter(f"{d}/scores.gguf", "llama")
w.add_tokenizer_model("llama")
w.add_token_list(list(vocab))
w.add_token_scores([0.0, 0.0, -1.0])  # 3 scores for 6 tokens
w.add_token_types([2, 3, 1, 1, 1, 1])
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY
echo "a b" > "$tk/text.txt"
probe tok_normalizer 1 30 "$tk/normalizer.json: the normalizer 'Lowercase' is not supported" -- \
  "$ztrain" tokenize --tokenizer "$tk/normalizer.json" --out "$tk/o1" "$tk/text.txt"
probe tok_pre_tokenizer 1 30 "$tk/pre.json: the pre-tokenizer 'UnicodeScripts' is not supported" -- \
  "$ztrain" tokenize --tokenizer "$tk/pre.json" --out "$tk/o2" "$tk/text.txt"
probe tok_byte_fallback 1 30 "$tk/bytes.json: byte_fallback is set but the vocabulary has no byte token <0x00> \(256 of the 256" -- \
  "$ztrain" tokenize --tokenizer "$tk/bytes.json" --out "$tk/o3" "$tk/text.txt"
probe tok_gguf_scores 1 30 "$tk/scores.gguf: tokenizer.ggml.scores has 3 entries for 6 tokens" -- \
  "$ztrain" tokenize --tokenizer "$tk/scores.gguf" --out "$tk/o4" "$tk/text.txt"
