// Data loaders: llm.c token shards and raw bytes, both read with pread where each batch lies.
// Both share one batch schedule (OrderedLoader) so the order rules live in a single place.
#include "runtime/data/data.hpp"

#include "runtime/data/chat_data.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <utility>

namespace zt {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kHeaderBytes = kShardHeaderBytes;

[[noreturn]] void fail(const std::string& msg) { throw DataError("data: " + msg); }

std::string errno_text() { return std::strerror(errno); }

// Owns a file descriptor, so that every early throw closes it.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Writers close explicitly: a failing close can mean the data never reached the disk.
  bool close() { return ::close(std::exchange(fd_, -1)) == 0; }

 private:
  int fd_;
};

Fd open_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path + ": cannot open: " + errno_text());
  return Fd(fd);
}

// pread may return fewer bytes than asked (signals, network file systems), so loop until done.
void pread_all(const Fd& fd, const std::string& path, void* buf, size_t n, int64_t off) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = ::pread(fd.get(), p, n, off);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path + ": read failed at byte " + std::to_string(off) + ": " + errno_text());
    if (got == 0) fail(path + ": unexpected end of file at byte " + std::to_string(off));
    p += got;
    n -= size_t(got);
    off += got;
  }
}

// glob(3) results, sorted bytewise so the order does not depend on the locale.
std::vector<std::string> glob_sorted(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0) out.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && out.empty())) {
    // A relative pattern names the folder it was looked for in: ranks on other hosts (or started
    // in another folder) resolve it elsewhere.
    std::error_code ec;
    const std::string where = pattern.starts_with('/') ? "" : " in '" + std::filesystem::current_path(ec).string() + "'";
    fail("no file matches '" + pattern + "'" + where);
  }
  if (rc != 0) fail("cannot expand '" + pattern + "' (read error)");
  std::sort(out.begin(), out.end());
  return out;
}

// Own Fisher-Yates: std::shuffle and uniform_int_distribution are implementation-defined, and all
// ranks must compute the same permutation even when built against different standard libraries.
// The modulo bias of a 64-bit draw is negligible here.
std::vector<int64_t> permutation(int64_t n, std::mt19937_64& rng) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[size_t(rng() % uint64_t(i + 1))]);
  return p;
}

struct Geometry {
  int64_t B, T, rank, N;
  int64_t local() const { return B * T; }        // one rank's micro-batch
  int64_t global() const { return N * B * T; }   // one step over all ranks
  std::string need_text() const {
    return "N*B*T+1 = " + std::to_string(N) + "*" + std::to_string(B) + "*" + std::to_string(T) +
           "+1 = " + std::to_string(global() + 1) + " tokens";
  }
};

// The batch schedule over a list of shards (the bytes format is a single shard). Rank r reads
// B*T+1 tokens at g*N*B*T + r*B*T for global slice g; shards are visited in order (or permuted),
// and within a shard the slices in order (or permuted) until the shard is used up.
class OrderedLoader : public DataLoader {
 public:
  void next(int32_t* inputs, int32_t* targets) override {
    const int64_t g = perm_.empty() ? slice_ : perm_[size_t(slice_)];
    const auto shard = size_t(order_[size_t(visit_)]);
    const int64_t pos = g * geo_.global() + geo_.rank * geo_.local();
    read(shard, pos, buf_);
    if (limit_ < vocab_)
      for (size_t i = 0; i < buf_.size(); ++i)
        if (buf_[i] < 0 || buf_[i] >= limit_)
          fail(where(shard, pos + int64_t(i)) + " is " + std::to_string(buf_[i]) +
               ", outside the model's vocabulary [0, " + std::to_string(limit_) + ") (model.vocab_size)");
    std::copy_n(buf_.begin(), geo_.local(), inputs);
    std::copy_n(buf_.begin() + 1, geo_.local(), targets);
    advance();
  }
  void reset() override { start_epoch(0); }
  void skip(int64_t batches) override {
    for (int64_t i = 0; i < batches; ++i) advance();
  }
  int vocab_limit() const override { return vocab_; }
  void limit_tokens(int vocab_size) override { limit_ = vocab_size; }
  int64_t num_tokens() const override {
    return std::accumulate(counts_.begin(), counts_.end(), int64_t{0});
  }
  int64_t batches_per_epoch() const override {
    int64_t n = 0;
    for (int64_t c : counts_) n += slices_in(c);
    return n;
  }

 protected:
  // counts: tokens per shard, each already checked to hold at least N*B*T+1.
  OrderedLoader(std::vector<int64_t> counts, Geometry geo, bool shuffle, uint64_t seed, int vocab)
      : counts_(std::move(counts)), geo_(geo), shuffle_(shuffle), seed_(seed), vocab_(vocab),
        buf_(size_t(geo.local() + 1)) {
    start_epoch(0);
  }
  // Fills out (B*T+1 tokens) from token position pos of shard.
  virtual void read(size_t shard, int64_t pos, std::vector<int32_t>& out) = 0;
  // The token at position pos of shard, for messages: "<file>: token <pos> ...".
  virtual std::string where(size_t shard, int64_t pos) const = 0;

 private:
  // Global slices read from a shard of `count` tokens: slice g holds tokens [g*N*B*T, (g+1)*N*B*T]
  // and is read while it fits. This is llm.c's rule for rank 0; llm.c applies it to each rank with
  // that rank's own offset, so a rank > 0 could leave a shard one slice early and the ranks would
  // stop reading the same global slice. Every rank uses rank 0's count: the ranks stay in step,
  // and since a slice that fits rank 0 fits the last rank too, nothing reads past the shard.
  int64_t slices_in(int64_t count) const { return std::max<int64_t>(1, (count - 1) / geo_.global()); }

  void start_epoch(int64_t epoch) {
    epoch_ = epoch;
    visit_ = 0;
    if (shuffle_) {
      rng_.seed(seed_ + uint64_t(epoch));
      order_ = permutation(int64_t(counts_.size()), rng_);
    } else {
      order_.resize(counts_.size());
      std::iota(order_.begin(), order_.end(), int64_t{0});
    }
    enter_shard();
  }

  // Slice permutations are drawn as each shard is entered (same generator, same sequence on every
  // rank), so a huge shard list never needs all permutations in memory at once.
  void enter_shard() {
    slice_ = 0;
    num_slices_ = slices_in(counts_[size_t(order_[size_t(visit_)])]);
    perm_ = shuffle_ ? permutation(num_slices_, rng_) : std::vector<int64_t>{};
  }

  void advance() {
    if (++slice_ < num_slices_) return;
    if (++visit_ < int64_t(order_.size())) enter_shard();
    else start_epoch(epoch_ + 1);
  }

  std::vector<int64_t> counts_;
  Geometry geo_;
  bool shuffle_;
  uint64_t seed_;
  int vocab_;
  int limit_ = vocab_;  // tokens from here up are refused (limit_tokens)
  std::vector<int32_t> buf_;
  std::mt19937_64 rng_;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;  // shard indices in visiting order for this epoch
  int64_t visit_ = 0;           // index into order_
  std::vector<int64_t> perm_;   // slice order in the current shard; empty: in order
  int64_t slice_ = 0, num_slices_ = 0;
};

// ---- llmc token shards --------------------------------------------------------------------------

struct Shard {
  std::string path;
  Fd fd;  // kept open: every batch is a pread of B*T+1 tokens, never the whole ~200 MB shard
  int64_t count;
  int token_bytes;  // 2 (version 1) or 4 (version 7)
};

Shard open_shard(const std::string& path, const Geometry& geo) {
  Fd fd = open_read(path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(path + ": cannot stat: " + errno_text());
  if (!S_ISREG(st.st_mode)) fail(path + ": not a regular file");
  const int64_t size = st.st_size;
  if (size < kHeaderBytes)
    fail(path + ": truncated header (" + std::to_string(size) + " bytes, the header alone is " +
         std::to_string(kHeaderBytes) + ")");
  unsigned char header[kHeaderBytes];
  pread_all(fd, path, header, sizeof header, 0);
  const auto [format, count] = parse_shard_header(header, path);
  const int64_t expected = kHeaderBytes + format.token_bytes * count;
  if (size != expected)
    fail(path + ": header says " + std::to_string(count) + " tokens, so " +
         std::to_string(expected) + " bytes, but the file has " + std::to_string(size) +
         " bytes (truncated shard?)");
  if (count < geo.global() + 1)
    fail(path + ": " + std::to_string(count) + " tokens, too small for one global batch (" +
         geo.need_text() + ")");
  return Shard{path, std::move(fd), count, format.token_bytes};
}

std::vector<int64_t> counts_of(const std::vector<Shard>& shards) {
  std::vector<int64_t> c;
  for (const Shard& s : shards) c.push_back(s.count);
  return c;
}

// The ids the shards' formats can hold: 65536 when all are version 1.
int limit_of(const std::vector<Shard>& shards) {
  int bytes = 2;
  for (const Shard& s : shards) bytes = std::max(bytes, s.token_bytes);
  return bytes == 2 ? int(kShardU16.max_tokens()) : INT32_MAX;
}

class LlmcLoader final : public OrderedLoader {
 public:
  LlmcLoader(std::vector<Shard> shards, Geometry geo, bool shuffle, uint64_t seed)
      : OrderedLoader(counts_of(shards), geo, shuffle, seed, limit_of(shards)), shards_(std::move(shards)) {}

 private:
  void read(size_t shard, int64_t pos, std::vector<int32_t>& out) override {
    const Shard& s = shards_[shard];
    const auto w = size_t(s.token_bytes);
    bytes_.resize(w * out.size());
    pread_all(s.fd, s.path, bytes_.data(), bytes_.size(), kHeaderBytes + s.token_bytes * pos);
    for (size_t i = 0; i < out.size(); ++i) {
      const unsigned char* p = &bytes_[w * i];
      // A version 7 id >= 2^31 does not fit int32: it becomes negative and is refused as outside
      // the vocabulary, like any other id the model does not have.
      out[i] = w == 2 ? int32_t(p[0] | p[1] << 8) : int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    }
  }
  std::string where(size_t shard, int64_t pos) const override {
    return shards_[shard].path + ": token " + std::to_string(pos) + " (byte " +
           std::to_string(kHeaderBytes + shards_[shard].token_bytes * pos) + ")";
  }

  std::vector<Shard> shards_;
  std::vector<unsigned char> bytes_;
};

// ---- bytes ----------------------------------------------------------------------------------------

// Every regular file under dir (following symlinks), into out. visited holds the real paths of the
// folders already walked, so a symlink back up the tree does not recurse forever.
void walk(const fs::path& dir, std::vector<fs::path>& out, std::set<fs::path>& visited) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  if (ec) fail(dir.string() + ": " + ec.message());
  if (!visited.insert(real).second) return;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    const fs::file_status st = fs::status(p, ec);  // follows symlinks; a broken one is an error
    if (ec) fail(p.string() + ": cannot read: " + ec.message());
    if (fs::is_directory(st)) walk(p, out, visited);
    else if (fs::is_regular_file(st)) out.push_back(p);
    // sockets, fifos and devices are not corpus files: skipped on purpose
  }
  if (ec) fail(dir.string() + ": cannot list folder: " + ec.message());
}



// [Note: bytes read in place] The files of a bytes corpus are one stream, read where each batch
// needs it (B*T+1 bytes a pread), never held in memory: a folder of gigabytes held whole once per
// split and rank ends a run of several ranks in the kernel's OOM killer. Every file is opened once
// at the start, so an unreadable one is named before the first step; one that shrinks later is
// named by the read that finds its end.
class ByteStream {
 public:
  explicit ByteStream(const std::string& list) {
    for (const std::string& path : list_files(list)) {
      const Fd fd = open_read(path);
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) fail(path + ": cannot stat: " + errno_text());
      if (st.st_size == 0) continue;
      files_.push_back({path, size_});
      size_ += st.st_size;
    }
  }
  int64_t size() const { return size_; }

  // "'FILE': byte K" for position pos of the stream.
  std::string where(int64_t pos) const {
    const File& f = files_[file_of(pos)];
    return "'" + f.path + "': byte " + std::to_string(pos - f.start);
  }

  // Bytes [pos, pos + n) of the stream into out.
  void read(int64_t pos, int64_t n, uint8_t* out) {
    for (size_t i = file_of(pos); n > 0; ++i) {
      if (i >= files_.size()) fail("'" + files_.back().path + "' ended before byte " + std::to_string(pos));
      const int64_t end = i + 1 < files_.size() ? files_[i + 1].start : size_;
      const int64_t m = std::min(n, end - pos);
      if (open_ != i) {  // batches read on in the same file, mostly: keep the last one open
        fd_.reset();
        fd_ = std::make_unique<Fd>(open_read(files_[i].path));
        open_ = i;
      }
      pread_all(*fd_, files_[i].path, out, size_t(m), pos - files_[i].start);
      out += m, pos += m, n -= m;
    }
  }

 private:
  struct File {
    std::string path;
    int64_t start;  // its first byte's position in the stream
  };
  // The file holding pos: the last whose start is <= pos.
  size_t file_of(int64_t pos) const {
    auto it = std::upper_bound(files_.begin(), files_.end(), pos, [](int64_t p, const File& f) { return p < f.start; });
    return size_t(it - files_.begin()) - 1;
  }

  std::vector<File> files_;  // non-empty files, in list order
  int64_t size_ = 0;
  size_t open_ = SIZE_MAX;
  std::unique_ptr<Fd> fd_;
};

// Bytes [begin, begin + count) of a stream: the whole of it, or the part a held-out split leaves.
class BytesLoader final : public OrderedLoader {
 public:
  BytesLoader(ByteStream stream, int64_t begin, int64_t count, Geometry geo, bool shuffle, uint64_t seed)
      : OrderedLoader({count}, geo, shuffle, seed, 256), stream_(std::move(stream)), begin_(begin) {}

 private:
  void read(size_t, int64_t pos, std::vector<int32_t>& out) override {
    bytes_.resize(out.size());
    stream_.read(begin_ + pos, int64_t(out.size()), bytes_.data());
    std::copy(bytes_.begin(), bytes_.end(), out.begin());
  }
  std::string where(size_t, int64_t pos) const override { return stream_.where(begin_ + pos); }

  ByteStream stream_;
  int64_t begin_;
  std::vector<uint8_t> bytes_;
};

std::unique_ptr<DataLoader> make_bytes(const DataConfig& cfg, Split split, const Geometry& geo,
                                       bool shuffle, uint64_t seed) {
  const bool held_out = cfg.val.empty() && split != Split::all;  // val is the tail of the train stream
  const std::string& list = (split == Split::val && !held_out) ? cfg.val : cfg.train;
  ByteStream stream(list);
  if (stream.size() == 0) fail("'" + list + "' holds no bytes");
  int64_t begin = 0, count = stream.size();
  if (held_out) {
    if (!(cfg.val_fraction > 0.0 && cfg.val_fraction < 1.0))
      throw ConfigError("config: data.val_fraction: must be in (0, 1), got " +
                        std::to_string(cfg.val_fraction));
    const auto n_val = static_cast<int64_t>(double(stream.size()) * cfg.val_fraction);
    if (split == Split::val) begin = count - n_val, count = n_val;
    else count -= n_val;
  }
  if (count < geo.global() + 1)
    fail(std::string(split == Split::val ? "val" : "train") + " split of '" + list + "' has " +
         std::to_string(count) + " tokens, too small for one global batch (" +
         geo.need_text() + ")");
  return std::make_unique<BytesLoader>(std::move(stream), begin, count, geo, shuffle, seed);
}

}  // namespace

std::vector<std::string> list_files(const std::string& list) {
  if (list.empty()) fail("no files given");
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(':', start), list.size());
    items.push_back(list.substr(start, end - start));
    if (items.back().empty()) fail("empty entry in file list '" + list + "'");
    start = end + 1;
  }
  return list_files(items);
}

std::vector<std::string> list_files(const std::vector<std::string>& items) {
  if (items.empty()) fail("no files given");
  std::vector<std::string> files;
  std::set<fs::path> seen, visited;
  auto take = [&](const fs::path& p) {
    std::error_code ec;
    const fs::path real = fs::canonical(p, ec);
    if (ec) fail(p.string() + ": " + ec.message());
    if (seen.insert(real).second) files.push_back(p.string());
  };
  for (const std::string& item : items) {
    if (item.empty()) fail("an empty path");
    for (const std::string& match : glob_sorted(item)) {
      std::error_code ec;
      const fs::file_status st = fs::status(match, ec);
      if (ec) fail(match + ": cannot read: " + ec.message());
      if (fs::is_directory(st)) {
        std::vector<fs::path> under;
        walk(match, under, visited);
        std::sort(under.begin(), under.end());
        for (const fs::path& p : under) take(p);
      } else if (fs::is_regular_file(st)) {
        take(match);
      } else {
        fail(match + ": not a regular file or folder");
      }
    }
  }
  return files;
}

std::unique_ptr<DataLoader> make_loader(const DataConfig& cfg, Split split, int B, int T, int rank,
                                        int world_size, uint64_t seed) {
  if (B <= 0 || T <= 0 || world_size <= 0 || rank < 0 || rank >= world_size)
    fail("bad batch geometry B=" + std::to_string(B) + " T=" + std::to_string(T) +
         " rank=" + std::to_string(rank) + " world_size=" + std::to_string(world_size));
  const Geometry geo{B, T, rank, world_size};
  const bool shuffle = cfg.shuffle && split != Split::val;  // validation is always in order
  if (cfg.format == "bytes") return make_bytes(cfg, split, geo, shuffle, seed);
  if (cfg.format == "chat") return make_chat_loader(cfg, split, B, T, rank, world_size, seed, shuffle);
  if (cfg.format != "llmc")
    throw ConfigError("config: data.format: unknown format '" + cfg.format + "'");
  if (split == Split::val && cfg.val.empty())
    throw ConfigError("config: data.val: no validation data given");
  std::vector<Shard> shards;
  for (const std::string& path : glob_sorted(split == Split::val ? cfg.val : cfg.train))
    shards.push_back(open_shard(path, geo));
  return std::make_unique<LlmcLoader>(std::move(shards), geo, shuffle, seed);
}

}  // namespace zt
