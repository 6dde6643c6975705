// `ztrain tokenize`: text files into llm.c token shards, with ztrain's own tokenizer.
//
// [Note: tokenizing a corpus] Each input file is a document (a .jsonl file: each line's "text"),
// written after the tokenizer's end-of-text token, as llm.c's scripts separate documents. The
// validation split is the first `val_fraction` of the input bytes, cut at the first line end from
// there (llm.c's first shard is its validation shard). Documents are cut into chunks of about
// `chunk_bytes` that threads encode at once; a chunk ends only after a line break followed by an
// ASCII letter, where every known split pattern (GPT-2's, Llama 3's, Qwen2's, SmolLM2's) ends a
// piece anyway, so the ids do not depend on the chunking or the number of threads. The shards are
// written in order as the chunks complete, with at most a few chunks per thread held at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace zt {

class Tokenizer;

struct TokenizeOptions {
  std::vector<std::string> inputs;  // files, folders, globs
  std::string out;                  // the folder the shards go to
  double val_fraction = 0.0;        // in [0, 1)
  int threads = 0;                  // 0: the machine's cores
  int64_t shard_tokens = 100'000'000;
  int64_t chunk_bytes = 1 << 20;
};

struct TokenizeReport {
  int64_t documents = 0, bytes = 0, train_tokens = 0, val_tokens = 0;
  double seconds = 0;
  int threads = 0, format_version = 0;
  std::vector<std::string> files;  // the shards written
};

// Throws DataError (inputs, a full disk), TokenizerError, or std::invalid_argument for options
// out of range. `progress` is called now and then with the input bytes done so far.
TokenizeReport tokenize_corpus(const Tokenizer& tok, const TokenizeOptions& opt,
                               const std::function<void(int64_t done, int64_t total, double seconds)>& progress = {});

}  // namespace zt
