// Data loaders. Each rank reads its own micro-batches: B*T+1 consecutive tokens, inputs are the
// first B*T and targets the same shifted by one. Without shuffling they go in order as llm.c's
// loader reads them: with N ranks, rank r takes the r-th B*T slice of each global slice of N*B*T
// tokens, moving to the next shard (or file set, wrapping at the end) when a slice no longer fits.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/data/token_shards.hpp"

namespace zt {

// Thrown for unreadable or malformed data: names the file and what is wrong with it.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DataLoader {
 public:
  virtual ~DataLoader() = default;
  // Fills inputs and targets (B*T each) with this rank's next micro-batch.
  virtual void next(int32_t* inputs, int32_t* targets) = 0;
  // Back to the first batch (validation starts from here each time).
  virtual void reset() = 0;
  // Moves on by `batches` micro-batches without reading them (a resumed run's position).
  virtual void skip(int64_t batches) = 0;
  // Largest token id + 1 the data may hold: 256 for bytes; for llmc shards the tokenizer's
  // vocabulary is not recorded, so what the shards' format holds (65536 for version 1).
  virtual int vocab_limit() const = 0;
  // From here on, a token >= `vocab_size` read is a DataError naming the file and the token's
  // position in it (the model would reject it with no word of where it came from).
  virtual void limit_tokens(int vocab_size) = 0;
  virtual int64_t num_tokens() const = 0;  // over all shards / files of this split
  virtual int64_t batches_per_epoch() const = 0;  // for this rank
  // What the loader made of its files, for the run's first lines (chat data: conversations, bad
  // lines, rows, trained targets); empty when there is nothing to say.
  virtual std::string summary() const { return ""; }
  // Whether some targets may be -1 (left out of the loss): chat data trains on the assistant's
  // tokens only. Token shards and bytes never mask, and their steps skip counting.
  virtual bool masks_targets() const { return false; }
};

// `all`: data.train whole, for a run that does not validate: bytes and chat data without data.val
// then hold nothing out (train holds back data.val_fraction of them for val).
enum class Split { train, val, all };

// Builds the loader for one split. Throws DataError (no file matches, bad header, a shard smaller
// than one global batch, ...) or ConfigError (Split::val without val data for llmc).
std::unique_ptr<DataLoader> make_loader(const DataConfig& cfg, Split split, int B, int T, int rank,
                                        int world_size, uint64_t seed);

// Expands files, folders and globs, in the order given; a folder's files (recursively, following
// links) are sorted by path, and each real file is taken once (symlinked duplicates would skew the
// corpus). Throws DataError naming a path that matches nothing or cannot be read.
std::vector<std::string> list_files(const std::vector<std::string>& items);
// The same for one ':'-separated list (data.train and data.val of bytes and chat data).
std::vector<std::string> list_files(const std::string& list);

}  // namespace zt
