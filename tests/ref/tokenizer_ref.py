#!/usr/bin/python3
"""Hugging Face `tokenizers` as the reference for ztrain's tokenizer.

    tokenizer_ref.py make OUT GPT2_TIKTOKEN SMOLLM2_GGUF
        also writes OUT/multilingual.txt (valid UTF-8: scripts, accents, emoji, digits, whitespace
        runs, special tokens) and OUT/invalid.bin (the same with bytes that are not UTF-8)
        writes OUT/{gpt2,gpt2_tiktoken,smollm2,llama3}/tokenizer.json, built with `tokenizers` from
        the files ztrain reads directly:
          gpt2          GPT-2's tokenizer as Hugging Face ships it (ByteLevel pre-tokenizer with
                        GPT-2's pattern), its vocabulary and merges taken from gpt2.tiktoken;
          gpt2_tiktoken the same with ignore_merges, as tiktoken encodes (transformers'
                        TikTokenConverter makes the same);
          smollm2       SmolLM2's: the GGUF file's vocabulary, merges and control tokens, with the
                        Digits(individual) + ByteLevel pre-tokenizer of its tokenizer.json;
          llama3        a Llama-3-style tokenizer: GPT-2's vocabulary behind Llama 3's Split
                        pattern, ByteLevel without its own pattern, ignore_merges, and Llama 3's
                        special tokens with reserved ones up to a vocabulary beyond 65536;
          qwen2         a Qwen2-style one: GPT-2's vocabulary, Qwen2's NFC normalizer and split
                        pattern (digits one at a time), and its special tokens.
    tokenizer_ref.py spm OUT
        SentencePiece-style BPE vocabularies (Llama 2, Mistral, Gemma): one vocabulary of 1000
        tokens trained here by `tokenizers` on a few license files (Metaspace pieces), written as
          spm_bf/tokenizer.json     Llama 2's form: Prepend("▁") + Replace(" ", "▁") normalizers,
                                    byte_fallback with the 256 <0xNN> tokens, fuse_unk;
          spm_first/tokenizer.json  transformers' newer form: a Metaspace pre-tokenizer
                                    (prepend_scheme "first", no split), bytes;
          spm_unk/tokenizer.json    Llama 2's form without byte tokens: characters the vocabulary
                                    lacks are <unk>, fused;
          spm_split/tokenizer.json  SentencePieceBPETokenizer's: Metaspace("always", split), bytes;
          gemma/tokenizer.json      Gemma's: Replace(" ", "▁") alone (no prefix space), bytes, and
                                    Gemma's special tokens;
          spm_bf.gguf, spm_unk.gguf, gemma.gguf  the same vocabularies as llama.cpp writes them
                                    (tokenizer.ggml.model "llama", scores, token types).
        Every form lists as merges every cut of a token into two tokens, ranked by the token's id,
        as transformers' converter does from a SentencePiece model; the GGUF scores are -id, so
        llama.cpp's merge-by-score order (which ztrain follows for "llama") is the same ranking.
    tokenizer_ref.py chat OUT
        writes OUT/chat.json: conversations rendered and tokenized by transformers'
        apply_chat_template with Gemma 3's and Llama 3's Jinja templates, through OUT/gemma (from
        `spm`) and a byte-level tokenizer with Llama 3's special tokens trained here (OUT/llama3_chat).
    tokenizer_ref.py check TOKENIZER_JSON SHARD_DIR FILE...
        encodes each FILE (each a document after the end-of-text token; each line's "text" of a
        .jsonl file) with `tokenizers` and
        compares with the shards `ztrain tokenize` wrote (val_* then train_*); on a mismatch
        prints the file, the position and both ids around it, and exits 1. Bytes that are not
        UTF-8 (which a Python str cannot hold) are their own pieces in ztrain; here they are
        merged by the model alone between the valid stretches, which encode as usual.
    tokenizer_ref.py bench TOKENIZER_JSON FILE...
        prints single-thread encode MB/s of `tokenizers` as JSON: every FILE a document encoded on
        its own (one Tokenizer, so its cache stays warm), best of three passes, as
        bench/tokenizer_bench does for ztrain.
"""
import base64
import json
import os
import pathlib
import re
import struct
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers  # noqa: E402
from tokenizers.models import BPE  # noqa: E402

LLAMA3_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
EOT_NAMES = ["<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_CHARS = bytes_to_unicode()


def as_chars(b):
    return "".join(BYTE_CHARS[x] for x in b)


def tiktoken_vocab_merges(path):
    ranks = {}
    for line in pathlib.Path(path).read_text().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    merges = []
    for tok, rank in ranks.items():  # as transformers' TikTokenConverter
        local = [(tok[:i], tok[i:], rank) for i in range(1, len(tok)) if tok[:i] in ranks and tok[i:] in ranks]
        merges.extend(sorted(local, key=lambda m: (ranks[m[0]], ranks[m[1]])))
    merges.sort(key=lambda m: m[2])
    vocab = {as_chars(t): r for t, r in ranks.items()}
    return vocab, [(as_chars(a), as_chars(b)) for a, b, _ in merges]


def byte_level(vocab, merges, pre, ignore_merges=False, specials=()):
    tok = Tokenizer(BPE(vocab, merges, fuse_unk=False, ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    return tok


def make(out, tiktoken_path, gguf_path):
    out = pathlib.Path(out)
    vocab, merges = tiktoken_vocab_merges(tiktoken_path)
    gpt2_pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    made = {
        "gpt2": byte_level(vocab, merges, gpt2_pre, specials=["<|endoftext|>"]),
        "gpt2_tiktoken": byte_level(vocab, merges, gpt2_pre, ignore_merges=True, specials=["<|endoftext|>"]),
        "llama3": byte_level(vocab, merges, pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), ignore_merges=True,
            # Llama 3's specials, and enough reserved ones (it has 256) to take the vocabulary past
            # 65536, so its shards need llm.c's uint32 format.
            specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
            + [f"<|reserved_special_token_{k}|>" for k in range(15400)]),
    }
    qwen2 = byte_level(vocab, merges, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    qwen2.normalizer = normalizers.NFC()
    made["qwen2"] = qwen2
    from gguf import GGUFReader
    r = GGUFReader(gguf_path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    tokens = strings("tokenizer.ggml.tokens")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in r.fields["tokenizer.ggml.token_type"].data]
    smol = Tokenizer(BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(" ")) for m in strings("tokenizer.ggml.merges")],
                         fuse_unk=False))
    smol.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                  pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    smol.decoder = decoders.ByteLevel()
    smol.add_special_tokens([AddedToken(tokens[i], normalized=False, special=True) for i, t in enumerate(types) if t == 3])
    made["smollm2"] = smol
    text = ("English: The quick brown fox's jumping, isn't it? I'LL, we've, they'RE.\n"
            "Français: déjà vu, garçon, œuvre — naïve café. Ελληνικά: καλημέρα κόσμε. Русский: съешь же ещё этих булок.\n"
            "中文：我能吞下玻璃而不伤身体。日本語：私はガラスを食べられます。한국어: 나는 유리를 먹을 수 있어요.\n"
            "عربي: أنا قادر على أكل الزجاج. हिन्दी: मैं काँच खा सकता हूँ। emoji: 👍🏽 👨‍👩‍👧‍👦 🇩🇪 ✨🎉\n"
            "digits: 0 12 345 6789 1234567890 3.14159 ١٢٣ ４５６ ²³ Ⅻ\n"
            "decomposed: cafe\u0301 nai\u0308ve A\u030a \u1100\u1161\u11a8 (NFC composes them)\n"
            "whitespace:   three\t\ttabs\u00a0nbsp\u3000ideographic  \n\n\n   \r\n\r\nend  \n"
            "code: def f(x):\n    return x**2  # comment\n\tif (a && b) { c++; }\n"
            "specials: <|endoftext|> <|im_start|>user\nhi<|im_end|> <|begin_of_text|><|reserved_special_token_15000|>\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "multilingual.txt").write_bytes((text * 3).encode())
    (out / "invalid.bin").write_bytes(text.encode() + b"invalid: \xff\xfe bad \xc3 cut \xe2\x82 x \xed\xa0\x80 "
                                      b"surrogate \xf8\x88\x80\x80\x80 \x80\x80abc\n" + text.encode())
    for name, tok in made.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        tok.save(str(out / name / "tokenizer.json"))
        print(f"{name}: vocabulary {tok.get_vocab_size()}")


SPACE = "\u2581"
TRAIN_FILES = ["/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0", "/usr/share/common-licenses/Artistic"]


def spm_vocab(specials, byte_fallback):
    """The trained pieces behind `specials` (and the 256 byte tokens), and every cut of a piece into
    two pieces as a merge, ranked by the piece's id."""
    from tokenizers import models, trainers
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
    t.train(TRAIN_FILES, trainers.BpeTrainer(vocab_size=1000, special_tokens=["<unk>"], show_progress=False))
    trained = [p for p, _ in sorted(t.get_vocab().items(), key=lambda kv: kv[1]) if p != "<unk>"]
    pieces = list(specials) + ([f"<0x{b:02X}>" for b in range(256)] if byte_fallback else []) + trained
    vocab = {p: i for i, p in enumerate(pieces)}
    ordinary = set(trained)
    merges = sorted(((p[:k], p[k:]) for p in trained for k in range(1, len(p)) if p[:k] in ordinary and p[k:] in ordinary),
                    key=lambda m: (vocab[m[0] + m[1]], vocab[m[0]], vocab[m[1]]))
    return pieces, vocab, merges


def spm_tokenizer(vocab, merges, specials, byte_fallback, normalizer=None, pre=None, prefix=True):
    tok = Tokenizer(BPE(vocab, merges, unk_token="<unk>", byte_fallback=byte_fallback, fuse_unk=True))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
                                    + ([decoders.Strip(" ", 1, 0)] if prefix else []))
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    return tok


def spm_gguf(path, pieces, specials, add_space_prefix):
    import gguf
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    # llama.cpp merges the pair making the token of the highest score: -id ranks the tokens as the
    # tokenizer.json's merges do (by the merged token's id).
    w.add_token_scores([-float(i) for i in range(len(pieces))])
    w.add_token_types([2 if p == "<unk>" else 3 if p in specials else 6 if re.fullmatch(r"<0x[0-9A-F]{2}>", p) else 1
                       for p in pieces])
    w.add_add_space_prefix(add_space_prefix)
    w.add_unk_token_id(pieces.index("<unk>"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
LLAMA2_SPECIALS = ["<unk>", "<s>", "</s>"]


def make_spm(out):
    out = pathlib.Path(out)
    replace = normalizers.Replace(" ", SPACE)
    out.mkdir(parents=True, exist_ok=True)
    pieces, vocab, merges = spm_vocab(LLAMA2_SPECIALS, True)
    made = {
        "spm_bf": spm_tokenizer(vocab, merges, LLAMA2_SPECIALS, True, normalizers.Sequence([normalizers.Prepend(SPACE), replace])),
        "spm_split": spm_tokenizer(vocab, merges, LLAMA2_SPECIALS, True,
                                   pre=pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)),
        "spm_first": spm_tokenizer(vocab, merges, LLAMA2_SPECIALS, True,
                                   pre=pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)),
    }
    spm_gguf(out / "spm_bf.gguf", pieces, LLAMA2_SPECIALS, True)
    pieces, vocab, merges = spm_vocab(LLAMA2_SPECIALS, False)
    made["spm_unk"] = spm_tokenizer(vocab, merges, LLAMA2_SPECIALS, False, normalizers.Sequence([normalizers.Prepend(SPACE), replace]))
    spm_gguf(out / "spm_unk.gguf", pieces, LLAMA2_SPECIALS, True)
    pieces, vocab, merges = spm_vocab(GEMMA_SPECIALS, True)
    made["gemma"] = spm_tokenizer(vocab, merges, GEMMA_SPECIALS, True, replace, prefix=False)
    spm_gguf(out / "gemma.gguf", pieces, GEMMA_SPECIALS, False)
    for name, tok in made.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        tok.save(str(out / name / "tokenizer.json"))
        print(f"{name}: vocabulary {tok.get_vocab_size()}")


# The templates as the models' tokenizer_config.json hold them (string contents only).
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}"
    "{%- endif -%}{%- for message in loop_messages -%}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}{%- endif -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}{%- set role = message['role'] -%}"
    "{%- endif -%}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}")
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
CONVERSATIONS = [
    [{"role": "system", "content": "You are a terse assistant."}, {"role": "user", "content": "What is the GNU license?"},
     {"role": "assistant", "content": "A free software license.\nIt protects your freedom."}],
    [{"role": "user", "content": "  Schreib: grüße, 東京, مرحبا 👍🏽  "}, {"role": "assistant", "content": "\nDone:\tgrüße 東京\n\n"},
     {"role": "user", "content": "And the warranty?"}, {"role": "assistant", "content": "There is no warranty, to the extent permitted."}],
    [{"role": "user", "content": "Copyright (C) 2007 Free Software Foundation"}],
]


def make_chat(out):
    from tokenizers import models, trainers
    from transformers import PreTrainedTokenizerFast
    out = pathlib.Path(out)
    bl = Tokenizer(models.BPE())
    bl.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bl.decoder = decoders.ByteLevel()
    bl.train(TRAIN_FILES, trainers.BpeTrainer(vocab_size=1000, special_tokens=LLAMA3_SPECIALS, show_progress=False,
                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    (out / "llama3_chat").mkdir(parents=True, exist_ok=True)
    bl.save(str(out / "llama3_chat" / "tokenizer.json"))
    cases = []
    for name, folder, template, bos, eos in [("gemma", "gemma", GEMMA3_TEMPLATE, "<bos>", "<eos>"),
                                             ("llama3", "llama3_chat", LLAMA3_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>")]:
        hf = PreTrainedTokenizerFast(tokenizer_file=str(out / folder / "tokenizer.json"), bos_token=bos, eos_token=eos)
        hf.chat_template = template
        for conv in CONVERSATIONS:
            gen = conv[-1]["role"] == "user"
            ids = hf.apply_chat_template(conv, tokenize=True, add_generation_prompt=gen)
            cases.append({"template": name, "tokenizer": str(out / folder / "tokenizer.json"), "messages": conv,
                          "generation_prompt": gen, "ids": ids,
                          "answers": [m["content"].strip() for m in conv if m["role"] == "assistant"]})
    (out / "chat.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1))
    print(f"chat: {len(cases)} conversations")


def read_shards(folder):
    ids = []
    files = sorted(pathlib.Path(folder).glob("val_*.bin")) + sorted(pathlib.Path(folder).glob("train_*.bin"))
    for f in files:
        data = f.read_bytes()
        magic, version, count = struct.unpack("<3i", data[:12])
        width = {1: 2, 7: 4}[version]
        assert len(data) == 1024 + width * count, f"{f}: size does not match its header"
        ids.extend(struct.unpack(f"<{count}{'H' if width == 2 else 'I'}", data[1024:]))
    return ids


# Maximal runs of valid UTF-8 and of invalid bytes.
UTF8 = re.compile(rb"(?:[\x00-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
                  rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})+")


def encode_bytes(tok, data):
    ids, at = [], 0
    for m in UTF8.finditer(data):
        if m.start() > at:  # invalid bytes: a piece of their own
            ids.extend(t.id for t in tok.model.tokenize(as_chars(data[at:m.start()])))
        ids.extend(tok.encode(m.group().decode("utf-8"), add_special_tokens=False).ids)
        at = m.end()
    if at < len(data):
        ids.extend(t.id for t in tok.model.tokenize(as_chars(data[at:])))
    return ids


def check(tokenizer_json, shard_dir, files):
    tok = Tokenizer.from_file(tokenizer_json)
    eot = next(tok.token_to_id(n) for n in EOT_NAMES if tok.token_to_id(n) is not None)
    got = read_shards(shard_dir)
    seen, real_files = set(), []
    for f in files:  # each real file once, as `ztrain tokenize` takes them
        if os.path.realpath(f) not in seen:
            seen.add(os.path.realpath(f))
            real_files.append(f)
    files = real_files
    at = 0
    for f in files:
        if f.endswith(".jsonl"):  # a document per line: its "text"
            want = []
            for line in pathlib.Path(f).read_text(encoding="utf-8").split("\n"):
                if line.strip():
                    want += [eot] + tok.encode(json.loads(line)["text"], add_special_tokens=False).ids
        else:
            want = [eot] + encode_bytes(tok, pathlib.Path(f).read_bytes())
        part = got[at:at + len(want)]
        if part != want:
            i = next((k for k, (a, b) in enumerate(zip(part, want)) if a != b), min(len(part), len(want)))
            print(f"MISMATCH {f} ({tokenizer_json}): token {i} of {len(want)}: ztrain {part[max(0, i - 3):i + 4]} "
                  f"tokenizers {want[max(0, i - 3):i + 4]}; around {tok.decode(want[max(0, i - 3):i + 4])!r}")
            sys.exit(1)
        at += len(want)
    if at != len(got):
        print(f"MISMATCH: ztrain wrote {len(got)} tokens, tokenizers {at}")
        sys.exit(1)
    print(f"{tokenizer_json}: {len(files)} files, {at} tokens identical")


def bench(tokenizer_json, paths):
    tok = Tokenizer.from_file(tokenizer_json)
    docs = []
    for p in paths:
        with open(p, encoding="utf-8", newline="") as f:  # "\r\n" stays as it is
            docs.append(f.read())
    size = sum(len(d.encode("utf-8")) for d in docs)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        n = sum(len(tok.encode(d, add_special_tokens=False).ids) for d in docs)
        best = min(best, time.perf_counter() - t)
    print(json.dumps({"bytes": size, "tokens": n, "seconds": best, "mb_per_s": size / 1e6 / best}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(*sys.argv[2:5])
    elif cmd == "spm":
        make_spm(sys.argv[2])
    elif cmd == "chat":
        make_chat(sys.argv[2])
    elif cmd == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "bench":
        bench(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
