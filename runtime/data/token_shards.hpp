// llm.c's token shards: a header of 256 little-endian int32 (magic, version, token count, then
// zeros) and the tokens. Version 1 (magic 20240520) stores uint16 tokens, enough for GPT-2's
// vocabulary; version 7 (magic 20240801, llm.c's Llama 3 shards) stores uint32. The loader
// (runtime/data/data.hpp) reads both; `ztrain tokenize` writes the narrowest that holds its
// tokenizer's vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace zt {

struct ShardFormat {
  int32_t magic, version, token_bytes;
  int64_t max_tokens() const { return int64_t(1) << (8 * token_bytes); }  // ids below this fit
};
inline constexpr ShardFormat kShardU16{20240520, 1, 2};
inline constexpr ShardFormat kShardU32{20240801, 7, 4};
inline constexpr int64_t kShardHeaderBytes = 256 * 4;

// Version 1 when every id of a vocabulary of `vocab_size` fits 16 bits, version 7 otherwise.
ShardFormat shard_format_for(int64_t vocab_size);

struct ShardHeader {
  ShardFormat format;
  int64_t count;  // tokens
};
// Reads the header's first ints; throws DataError naming `path` for an unknown magic or version
// or a negative count.
ShardHeader parse_shard_header(const unsigned char (&header)[kShardHeaderBytes], const std::string& path);

// Writes the shards of one split as DIR/<prefix>_000000.bin, _000001.bin, ... of at most
// `shard_tokens` tokens each, streaming (a shard is never held whole). [Note: a corpus appears
// whole] Every shard is written and fsynced under a temporary name (<name>.tmp-<pid>-<n>, which no
// `train_*.bin` glob matches) and all of them are renamed into place by publish(), once the whole
// corpus is written: an interrupted or failed run (Ctrl-C, SIGKILL, a full disk) leaves no shard
// a loader would read as part of the corpus. Its temporary files are removed when the writer is
// destroyed unpublished or a signal ends the run, and a killed run's by the next tokenize into the
// folder. Errors name the file.
class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string prefix, ShardFormat format, int64_t shard_tokens);
  ~ShardWriter();
  // Throws DataError for a token the format cannot hold.
  void write(std::span<const int32_t> tokens);
  // Completes the last shard (still under its temporary name); call once, after the last write.
  void finish();
  // Renames every finished shard into place; after finish() (of every split's writer).
  void publish();
  const std::vector<std::string>& files() const { return files_; }
  int64_t tokens() const { return total_; }

 private:
  struct Open;
  void close_current();

  std::string dir_, prefix_;
  ShardFormat format_;
  int64_t shard_tokens_;
  std::unique_ptr<Open> open_;
  std::vector<std::unique_ptr<Open>> done_;  // complete, not yet published
  std::vector<std::string> files_;
  std::vector<unsigned char> bytes_;
  int64_t total_ = 0;
};

// Writes one version-1 shard (tests and tools).
void write_llmc_shard(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace zt
