// Tokenizers from the files the models' own tools write, one reader per format, each the only
// code that knows its format's fields and quirks:
//   - Hugging Face `tokenizer.json` (model "BPE" with a ByteLevel pre-tokenizer, optionally after
//     Split and Digits steps; or SentencePiece-style, with a Metaspace pre-tokenizer or
//     Replace/Prepend normalizers of '▁', byte_fallback and fuse_unk; added tokens);
//   - a GGUF file's `tokenizer.ggml.*` metadata (model "gpt2"; the split patterns chosen by
//     `tokenizer.ggml.pre` as llama.cpp names them; or model "llama", SentencePiece's pieces
//     merged by their scores as llama.cpp does);
//   - a tiktoken rank file (base64 token, rank per line; GPT-2's `gpt2.tiktoken`).
// Token strings in tokenizer.json and GGUF are written in GPT-2's byte-to-character alphabet, or
// SentencePiece's '▁' and <0xNN>; the readers turn them back into bytes, so the Tokenizer only
// ever sees bytes.
#pragma once

#include <string>

#include "runtime/text/tokenizer.hpp"

namespace zt {

// PATH is a folder holding tokenizer.json, a .json file, a GGUF file (by its magic) or a
// .tiktoken file. Throws TokenizerError naming the file and what it cannot use (a SentencePiece
// model, a normalizer, a pre-tokenizer step or behaviour this reader does not do, ...).
Tokenizer load_tokenizer(const std::string& path);

// Whether a model's path carries its tokenizer: a folder holding tokenizer.json, or a GGUF file
// (read by its magic; whether its metadata holds a usable tokenizer is load_tokenizer's to say).
bool holds_tokenizer(const std::string& path);

}  // namespace zt
