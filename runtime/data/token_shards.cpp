#include "runtime/data/token_shards.hpp"

#include <fcntl.h>

#include <cstdio>
#include <utility>

#include "runtime/data/data.hpp"
#include "runtime/file_io.hpp"

namespace zt {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw DataError("data: " + msg); }

// The format is little endian whatever the host is; decoding bytes explicitly keeps it so.
int32_t load_le32(const unsigned char* p) {
  return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
}
void store_le(unsigned char* p, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

std::vector<unsigned char> header_bytes(ShardFormat f, int64_t count) {
  std::vector<unsigned char> h(size_t(kShardHeaderBytes), 0);
  store_le(h.data(), uint32_t(f.magic), 4);
  store_le(h.data() + 4, uint32_t(f.version), 4);
  store_le(h.data() + 8, uint32_t(count), 4);
  return h;
}

}  // namespace

ShardFormat shard_format_for(int64_t vocab_size) { return vocab_size <= kShardU16.max_tokens() ? kShardU16 : kShardU32; }

ShardHeader parse_shard_header(const unsigned char (&header)[kShardHeaderBytes], const std::string& path) {
  const int32_t magic = load_le32(header), version = load_le32(header + 4), count = load_le32(header + 8);
  ShardFormat format{};
  for (const ShardFormat& f : {kShardU16, kShardU32})
    if (magic == f.magic) format = f;
  if (format.magic == 0)
    fail(path + ": bad magic " + std::to_string(magic) + ", expected " + std::to_string(kShardU16.magic) + " or " +
         std::to_string(kShardU32.magic) + " (not an llm.c token shard)");
  if (version != format.version)
    fail(path + ": unsupported version " + std::to_string(version) + " for magic " + std::to_string(magic) +
         ", expected " + std::to_string(format.version));
  if (count < 0) fail(path + ": negative token count " + std::to_string(count));
  return {format, count};
}

struct ShardWriter::Open {
  std::string path;
  ReplacedFile file;
  int64_t count = 0;
  Open(std::string p) : path(std::move(p)), file(path, "tokenize") {}
};

ShardWriter::ShardWriter(std::string dir, std::string prefix, ShardFormat format, int64_t shard_tokens)
    : dir_(std::move(dir)), prefix_(std::move(prefix)), format_(format),
      // The header's count is an int32: llm.c's shards stay far below that.
      shard_tokens_(std::min<int64_t>(shard_tokens, INT32_MAX)) {
  if (shard_tokens_ <= 0) fail("a shard must hold at least one token, got " + std::to_string(shard_tokens));
}

ShardWriter::~ShardWriter() = default;  // unpublished shards' temporary files are removed

void ShardWriter::write(std::span<const int32_t> tokens) {
  while (!tokens.empty()) {
    if (!open_) {
      char name[32];
      std::snprintf(name, sizeof name, "_%06zu.bin", files_.size() + done_.size());
      open_ = std::make_unique<Open>(dir_ + "/" + prefix_ + name);
    }
    const size_t n = size_t(std::min<int64_t>(int64_t(tokens.size()), shard_tokens_ - open_->count));
    bytes_.resize(n * size_t(format_.token_bytes));
    for (size_t i = 0; i < n; ++i) {
      if (tokens[i] < 0 || tokens[i] >= format_.max_tokens())
        fail(open_->path + ": token " + std::to_string(tokens[i]) + " does not fit a version " +
             std::to_string(format_.version) + " shard");
      store_le(bytes_.data() + i * size_t(format_.token_bytes), uint32_t(tokens[i]), format_.token_bytes);
    }
    open_->file.file().write_at(bytes_.data(), bytes_.size(),
                                uint64_t(kShardHeaderBytes + open_->count * format_.token_bytes));
    open_->count += int64_t(n);
    total_ += int64_t(n);
    tokens = tokens.subspan(n);
    if (open_->count == shard_tokens_) close_current();
  }
}

void ShardWriter::close_current() {
  const auto h = header_bytes(format_, open_->count);
  open_->file.file().write_at(h.data(), h.size(), 0);
  open_->file.close();
  done_.push_back(std::move(open_));
}

void ShardWriter::finish() {
  if (open_) close_current();
}

void ShardWriter::publish() {
  for (std::unique_ptr<Open>& shard : done_) {
    shard->file.commit();
    files_.push_back(shard->path);
  }
  done_.clear();
}

void write_llmc_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > size_t(INT32_MAX))
    fail(path + ": " + std::to_string(tokens.size()) + " tokens do not fit an llmc header");
  std::vector<unsigned char> bytes = header_bytes(kShardU16, int64_t(tokens.size()));
  bytes.resize(size_t(kShardHeaderBytes) + 2 * tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) store_le(bytes.data() + kShardHeaderBytes + 2 * i, tokens[i], 2);
  try {
    CheckpointFile out(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, "data");
    out.write_at(bytes.data(), bytes.size(), 0);
  } catch (const CheckpointError& e) {
    throw DataError(e.what());
  }
}

}  // namespace zt
