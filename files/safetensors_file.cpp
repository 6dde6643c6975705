// Hugging Face safetensors: an 8-byte little-endian header length N, N bytes of JSON
// ({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then the data,
// offsets counted from the byte after the header. Everything the header says is checked at open,
// so read_f32 needs only the range checks of its own arguments.
#include "files/safetensors_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "files/json_text.hpp"
#include "tensor/dtype.hpp"  // f16_to_f32 and bf16_to_f32: exact, subnormals, inf and NaN included

namespace zt {

namespace {

// The data are little-endian and F32 is read straight into the caller's floats.
static_assert(std::endian::native == std::endian::little, "safetensors reading assumes a little-endian host");
static_assert(sizeof(off_t) == 8, "pread offsets must reach past 2 GiB");

using Json = nlohmann::ordered_json;  // keeps the header's order for ties in data offset

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the safetensors library's own limit
// Source bytes per pread when widening: large enough that the syscall cost vanishes, small enough
// that a read of a rank's slice never holds more than this beyond the caller's buffer.
constexpr int64_t kChunkBytes = 1 << 20;

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error("safetensors '" + path + "': " + what);
}

std::runtime_error tensor_error(const std::string& path, const std::string& name, const std::string& what) {
  return file_error(path, "tensor '" + name + "': " + what);
}

// Bits per element of every dtype the safetensors format names (F4 and F6 pack below a byte).
std::optional<int> dtype_bits(const std::string& dtype) {
  static const std::unordered_map<std::string, int> bits = {
      {"F4", 4},      {"F6_E2M3", 6},  {"F6_E3M2", 6},  {"BOOL", 8},     {"U8", 8},    {"I8", 8},   {"F8_E4M3", 8},
      {"F8_E5M2", 8}, {"F8_E8M0", 8},  {"I16", 16},     {"U16", 16},     {"F16", 16},  {"BF16", 16}, {"I32", 32},
      {"U32", 32},    {"F32", 32},     {"I64", 64},     {"U64", 64},     {"F64", 64},  {"C64", 64}};
  const auto it = bits.find(dtype);
  if (it == bits.end()) return std::nullopt;
  return it->second;
}

// The dtypes read_f32 widens.
enum class Source { f32, bf16, f16, other };

Source source_of(const std::string& dtype) {
  if (dtype == "F32") return Source::f32;
  if (dtype == "BF16") return Source::bf16;
  if (dtype == "F16") return Source::f16;
  return Source::other;
}

std::string dims_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// A JSON number that is a non-negative integer within int64, or nothing.
std::optional<int64_t> count_of(const Json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  return std::nullopt;
}

// An open file descriptor, closed by its owner.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// One safetensors file, open for the life of the TensorFile.
struct Shard {
  std::string path;
  Fd fd;
  int64_t size = 0;        // bytes in the file
  int64_t data_start = 0;  // 8 + the header's length
};

// One tensor's entry with where its bytes lie.
struct Located {
  TensorFileEntry entry;
  const Shard* shard = nullptr;
  int64_t offset = 0;  // of its first byte, in the file
  int64_t bytes = 0;
  int64_t numel = 0;
  Source source = Source::other;
};

// pread until `bytes` bytes at `offset` are in `dst`: short reads and EINTR are retried, the end
// of the file (it shrank since open checked its size) is an error. `what` says what is being read.
void pread_all(const Shard& s, const std::string& what, void* dst, int64_t bytes, int64_t offset) {
  auto* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t r = ::pread(s.fd.get(), p, static_cast<size_t>(bytes), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw file_error(s.path, what + ": read at byte " + std::to_string(offset) + " failed: " + std::strerror(errno));
    if (r == 0)
      throw file_error(s.path, what + ": short read: the file ends before byte " + std::to_string(offset + bytes) +
                                   " (did it change after it was opened?)");
    p += r, bytes -= r, offset += r;
  }
}

// Opens one safetensors file and checks its header; returns the shard and its tensors in data order.
std::pair<std::unique_ptr<Shard>, std::vector<Located>> open_shard(const std::string& path) {
  auto shard = std::unique_ptr<Shard>(new Shard{path, Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC))});
  if (shard->fd.get() < 0) throw file_error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(shard->fd.get(), &st) != 0) throw file_error(path, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw file_error(path, "not a regular file");
  shard->size = st.st_size;
  if (shard->size < 8)
    throw file_error(path, "file of " + std::to_string(shard->size) + " bytes is too short for the 8-byte header length");

  uint64_t header_len = 0;
  pread_all(*shard, "header", &header_len, 8, 0);
  const auto room = static_cast<uint64_t>(shard->size - 8);
  if (header_len > room)
    throw file_error(path, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                               std::to_string(shard->size) + " bytes): truncated or not a safetensors file");
  if (header_len >= kMaxHeaderBytes)
    throw file_error(path, "header length " + std::to_string(header_len) + " is over safetensors' limit of 100 MB");
  std::string text(header_len, '\0');
  pread_all(*shard, "header", text.data(), static_cast<int64_t>(header_len), 8);
  shard->data_start = 8 + static_cast<int64_t>(header_len);

  JsonParsed<Json> parsed = parse_json<Json>(text);  // [Note: JSON from files] in files/json_text.hpp
  if (!parsed.ok()) throw file_error(path, "header is not valid JSON: " + parsed.error);
  const Json header = std::move(parsed.value);
  if (!header.is_object()) throw file_error(path, "header is not a JSON object");

  const int64_t data_size = shard->size - shard->data_start;
  std::vector<Located> tensors;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    if (!v.is_object()) throw tensor_error(path, name, "header entry is not an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!v.contains(key)) throw tensor_error(path, name, std::string("header entry has no \"") + key + "\"");
    const auto dtype = v.find("dtype"), shape = v.find("shape"), offsets = v.find("data_offsets");
    if (!dtype->is_string()) throw tensor_error(path, name, "\"dtype\" is not a string");
    Located t;
    t.entry = {name, {}, dtype->get<std::string>(), path};
    const auto bits = dtype_bits(t.entry.dtype);
    if (!bits) throw tensor_error(path, name, "unknown dtype \"" + t.entry.dtype + "\"");
    if (!shape->is_array()) throw tensor_error(path, name, "\"shape\" is not an array");
    for (const auto& d : *shape) {
      const auto n = count_of(d);
      if (!n) throw tensor_error(path, name, "shape " + show_json(*shape) + " has a dimension that is not a non-negative integer");
      t.entry.shape.push_back(*n);
    }
    // Bounded by the bits that fit in int64, so numel * bits below cannot overflow.
    constexpr int64_t kMaxNumel = std::numeric_limits<int64_t>::max() / 64;
    t.numel = 1;
    if (std::find(t.entry.shape.begin(), t.entry.shape.end(), 0) != t.entry.shape.end()) t.numel = 0;
    for (const int64_t n : t.entry.shape) {
      if (t.numel == 0) break;
      if (t.numel > kMaxNumel / n) throw tensor_error(path, name, "shape " + dims_text(t.entry.shape) + " has too many elements");
      t.numel *= n;
    }
    if (!offsets->is_array() || offsets->size() != 2 || !count_of((*offsets)[0]) || !count_of((*offsets)[1]))
      throw tensor_error(path, name, "\"data_offsets\" " + show_json(*offsets) + " is not two non-negative integers");
    const int64_t begin = *count_of((*offsets)[0]), end = *count_of((*offsets)[1]);
    const int64_t want_bits = t.numel * *bits;
    if (want_bits % 8 != 0 || begin > end || end - begin != want_bits / 8)
      throw tensor_error(path, name, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] hold " +
                                         std::to_string(end - begin) + " bytes, but shape " + dims_text(t.entry.shape) +
                                         " of " + t.entry.dtype + " needs " + std::to_string(want_bits / 8) +
                                         (want_bits % 8 ? " and a fraction" : ""));
    if (end > data_size)
      throw file_error(path, "truncated: tensor '" + name + "' needs bytes up to " +
                                 std::to_string(shard->data_start + end) + " but the file has " +
                                 std::to_string(shard->size));
    t.offset = shard->data_start + begin;
    t.bytes = end - begin;
    t.source = source_of(t.entry.dtype);
    tensors.push_back(std::move(t));
  }
  // The file's order is its data's order; the header's order breaks ties (empty tensors). As the
  // safetensors library requires, the tensors' bytes follow one another from the data's start:
  // two tensors overlapping would read each other's bytes.
  std::stable_sort(tensors.begin(), tensors.end(), [](const Located& a, const Located& b) { return a.offset < b.offset; });
  int64_t expected = shard->data_start;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Located& t = tensors[i];
    if (t.offset != expected)
      throw tensor_error(path, t.entry.name, "its data starts at byte " + std::to_string(t.offset - shard->data_start) +
                                                 " of the data, " +
                                                 (t.offset < expected ? "inside '" + tensors[i - 1].entry.name + "'s bytes (overlapping tensors)"
                                                                      : "after a gap (the tensors' bytes follow one another)"));
    expected = t.offset + t.bytes;
  }
  for (auto& t : tensors) t.shard = shard.get();
  return {std::move(shard), std::move(tensors)};
}

Json read_index(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw file_error(path, "cannot open index: " + ec.message());
  if (size >= kMaxHeaderBytes) throw file_error(path, "index of " + std::to_string(size) + " bytes is over 100 MB");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw file_error(path, "cannot read index");
  JsonParsed<Json> parsed = parse_json<Json>(text.str());
  if (!parsed.ok()) throw file_error(path, "index is not valid JSON: " + parsed.error);
  return std::move(parsed.value);
}

class SafetensorsFile final : public TensorFile {
 public:
  // `path` names the set in errors that concern no one shard (an unknown tensor name).
  explicit SafetensorsFile(std::string path) : path_(std::move(path)) {}

  void add(std::unique_ptr<Shard> shard, std::vector<Located> tensors) {
    shards_.push_back(std::move(shard));
    for (auto& t : tensors) {
      by_name_.emplace(t.entry.name, entries_.size());
      entries_.push_back(t.entry);
      located_.push_back(std::move(t));
    }
  }

  const std::vector<TensorFileEntry>& entries() const override { return entries_; }

  const TensorFileEntry* find(const std::string& name) const override {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &entries_[it->second];
  }

  // Safe to call from several threads at once: pread has no shared file position.
  void read_f32(const std::string& name, int64_t begin, int64_t n, float* out) const override {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) throw file_error(path_, "no tensor '" + name + "'");
    const Located& t = located_[it->second];
    const Shard& s = *t.shard;
    if (begin < 0 || n < 0 || begin > t.numel || n > t.numel - begin)
      throw tensor_error(s.path, name, "elements [" + std::to_string(begin) + ", " + std::to_string(begin + n) +
                                           ") are outside its " + std::to_string(t.numel));
    if (t.source == Source::other)
      throw tensor_error(s.path, name, "dtype " + t.entry.dtype + " is not read as f32 (F32, BF16 and F16 are)");
    const std::string what = "tensor '" + name + "'";
    if (t.source == Source::f32) return pread_all(s, what, out, n * 4, t.offset + begin * 4);
    const auto widen = t.source == Source::bf16 ? bf16_to_f32 : f16_to_f32;
    std::vector<uint16_t> bounce(static_cast<size_t>(std::min<int64_t>(n, kChunkBytes / 2)));
    for (int64_t done = 0; done < n;) {
      const int64_t k = std::min<int64_t>(n - done, static_cast<int64_t>(bounce.size()));
      pread_all(s, what, bounce.data(), k * 2, t.offset + (begin + done) * 2);
      for (int64_t i = 0; i < k; ++i) out[done + i] = widen(bounce[static_cast<size_t>(i)]);
      done += k;
    }
  }

 private:
  std::string path_;
  std::vector<std::unique_ptr<Shard>> shards_;  // owned here; located_ points into them
  std::vector<TensorFileEntry> entries_;
  std::vector<Located> located_;  // parallel to entries_
  std::unordered_map<std::string, size_t> by_name_;
};

// A sharded set. The index is its table of contents: a tensor a shard holds beyond what the
// index maps to it is not listed (another shard may hold the same name, and which one is meant
// would be a guess).
std::unique_ptr<TensorFile> open_index(const std::string& path) {
  const Json index = read_index(path);
  const auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object()) throw file_error(path, "index has no \"weight_map\" object");
  // Shards by file name, which numbers them in HF's sets (model-00001-of-00004.safetensors, ...),
  // each with its tensors in the index's order.
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string() || file.get<std::string>().empty() || std::filesystem::path(file.get<std::string>()).is_absolute())
      throw file_error(path, "tensor '" + name + "' maps to " + show_json(file) + ", not a shard file name in its folder");
    by_shard[file.get<std::string>()].push_back(name);
  }
  const auto folder = std::filesystem::path(path).parent_path();
  auto set = std::make_unique<SafetensorsFile>(path);
  for (const auto& [file, names] : by_shard) {
    const std::string shard_path = (folder / file).string();
    std::error_code ec;
    if (!std::filesystem::exists(shard_path, ec))
      throw file_error(path, "shard '" + file + "' (holding tensor '" + names.front() + "'" +
                                 (names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "") +
                                 ") is missing: no file " + shard_path);
    auto [shard, tensors] = open_shard(shard_path);
    std::unordered_set<std::string> held;
    for (const auto& t : tensors) held.insert(t.entry.name);
    for (const auto& name : names)
      if (!held.count(name))
        throw file_error(path, "tensor '" + name + "' maps to shard '" + file + "', which does not hold it");
    const std::unordered_set<std::string> wanted(names.begin(), names.end());
    std::erase_if(tensors, [&](const Located& t) { return !wanted.count(t.entry.name); });
    set->add(std::move(shard), std::move(tensors));
  }
  return set;
}

}  // namespace

std::unique_ptr<TensorFile> open_safetensors(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return open_index(path);
  auto file = std::make_unique<SafetensorsFile>(path);
  auto [shard, tensors] = open_shard(path);
  file->add(std::move(shard), std::move(tensors));
  return file;
}

bool is_safetensors_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[9] = {};
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | head[i];
  return n >= 2 && n < (uint64_t{1} << 40) && head[8] == '{';
}

}  // namespace zt
