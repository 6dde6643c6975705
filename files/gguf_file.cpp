// GGUF reading ([Note: GGUF layout] in files/gguf_file.hpp): the header through a buffered
// reader that checks every count and length against the bytes left in the file before it
// allocates, so a hostile or truncated file fails with a message instead of a huge allocation;
// tensor data through pread of the covering blocks only.
#include "files/gguf_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "tensor/dtype.hpp"

namespace zt {

static_assert(std::endian::native == std::endian::little, "GGUF is read as little-endian bytes in place");

namespace {

// ggml's types by id (ggml.h's enum ggml_type): name, elements per block, bytes per block. The
// ids ggml removed (4, 5: Q4_2, Q4_3; 31-33: Q4_0_4_4..; 36-38: IQ4_NL_4_4..) are unknown.
struct GgmlType {
  const char* name;
  uint32_t block;
  uint32_t bytes;
};
constexpr uint32_t kQK_K = 256;
constexpr GgmlType kGgmlTypes[] = {
    {"F32", 1, 4},                                                 // 0
    {"F16", 1, 2},                                                 // 1
    {"Q4_0", 32, 2 + 16},                                          // 2
    {"Q4_1", 32, 2 + 2 + 16},                                      // 3
    {nullptr, 0, 0},                                               // 4: removed
    {nullptr, 0, 0},                                               // 5: removed
    {"Q5_0", 32, 2 + 4 + 16},                                      // 6
    {"Q5_1", 32, 2 + 2 + 4 + 16},                                  // 7
    {"Q8_0", 32, 2 + 32},                                          // 8
    {"Q8_1", 32, 4 + 4 + 32},                                      // 9
    {"Q2_K", kQK_K, 2 + 2 + kQK_K / 16 + kQK_K / 4},               // 10
    {"Q3_K", kQK_K, 2 + kQK_K / 4 + kQK_K / 8 + 12},               // 11
    {"Q4_K", kQK_K, 2 + 2 + kQK_K / 2 + 12},                       // 12
    {"Q5_K", kQK_K, 2 + 2 + kQK_K / 2 + kQK_K / 8 + 12},           // 13
    {"Q6_K", kQK_K, 2 + kQK_K / 2 + kQK_K / 4 + kQK_K / 16},       // 14
    {"Q8_K", kQK_K, 4 + kQK_K + kQK_K / 8},                        // 15
    {"IQ2_XXS", kQK_K, 2 + kQK_K / 4},                             // 16
    {"IQ2_XS", kQK_K, 2 + kQK_K / 4 + kQK_K / 32},                 // 17
    {"IQ3_XXS", kQK_K, 2 + kQK_K / 4 + kQK_K / 8},                 // 18
    {"IQ1_S", kQK_K, 2 + kQK_K / 8 + kQK_K / 16},                  // 19
    {"IQ4_NL", 32, 2 + 16},                                        // 20
    {"IQ3_S", kQK_K, 2 + kQK_K / 4 + kQK_K / 8 + kQK_K / 32 + 4},  // 21
    {"IQ2_S", kQK_K, 2 + kQK_K / 4 + kQK_K / 16},                  // 22
    {"IQ4_XS", kQK_K, 2 + 2 + kQK_K / 2 + kQK_K / 64},             // 23
    {"I8", 1, 1},                                                  // 24
    {"I16", 1, 2},                                                 // 25
    {"I32", 1, 4},                                                 // 26
    {"I64", 1, 8},                                                 // 27
    {"F64", 1, 8},                                                 // 28
    {"IQ1_M", kQK_K, kQK_K / 8 + kQK_K / 16 + kQK_K / 32},         // 29
    {"BF16", 1, 2},                                                // 30
    {nullptr, 0, 0},                                               // 31: removed
    {nullptr, 0, 0},                                               // 32: removed
    {nullptr, 0, 0},                                               // 33: removed
    {"TQ1_0", kQK_K, 2 + 4 * 13},                                  // 34
    {"TQ2_0", kQK_K, 2 + 64},                                      // 35
    {nullptr, 0, 0},                                               // 36: removed
    {nullptr, 0, 0},                                               // 37: removed
    {nullptr, 0, 0},                                               // 38: removed
    {"MXFP4", 32, 1 + 16},                                         // 39
};
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kBF16 = 30;
constexpr uint32_t kNumGgmlTypes = sizeof kGgmlTypes / sizeof kGgmlTypes[0];
constexpr int kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 16;  // nested metadata arrays; bounds the recursion on a hostile file

const GgmlType* ggml_type(uint32_t id) { return id < kNumGgmlTypes && kGgmlTypes[id].name ? &kGgmlTypes[id] : nullptr; }

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// One block of 32 elements to f32, as ggml's dequantize_row_* (and gguf-py's quants.py) do it:
// element j < 16 is the low nibble of byte j, element j + 16 its high nibble. The results are
// bit-identical to numpy's whatever the compiler fuses: q (at most 8 bits) times d (an f16's 11)
// is exact in f32, so Q4_1's q * d + m rounds once, as a multiply-add or not.
void dequant_q4_0(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b));
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0x0f) - 8) * d;
    y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}
void dequant_q4_1(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b)), m = f16_to_f32(load_u16(b + 2));
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(b[4 + j] & 0x0f) * d + m;
    y[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
  }
}
void dequant_q8_0(const uint8_t* b, float* y) {
  const float d = f16_to_f32(load_u16(b));
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// The header's bytes in order, through a buffer filled with pread. Every read is checked
// against the file's size first, so "truncated" is reported with what was being read.
class HeaderReader {
 public:
  HeaderReader(int fd, uint64_t size, const std::string& path) : fd_(fd), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void read(void* dst, uint64_t n, const char* what) {
    if (n > left())
      throw std::runtime_error("gguf '" + path_ + "': truncated header: " + what + " needs " + std::to_string(n) +
                               " bytes at offset " + std::to_string(pos_) + ", the file has " + std::to_string(size_));
    auto* d = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (buf_pos_ == buf_len_) fill();
      const uint64_t k = std::min<uint64_t>(n, buf_len_ - buf_pos_);
      std::memcpy(d, buf_.data() + buf_pos_, k);
      d += k, n -= k, buf_pos_ += k, pos_ += k;
    }
  }
  template <typename T>
  T get(const char* what) {
    T v;
    read(&v, sizeof v, what);
    return v;
  }
  std::string string(const char* what) {
    const uint64_t len = get<uint64_t>(what);
    if (len > left())
      throw std::runtime_error("gguf '" + path_ + "': " + what + ": string length " + std::to_string(len) +
                               " at offset " + std::to_string(pos_ - 8) + " runs past the end of the file (" +
                               std::to_string(size_) + " bytes): a corrupt or truncated file");
    std::string s(len, '\0');
    read(s.data(), len, what);
    return s;
  }

 private:
  void fill() {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf_.size(), left()));
    ssize_t r;
    while ((r = ::pread(fd_, buf_.data(), want, static_cast<off_t>(pos_))) < 0 && errno == EINTR) {
    }
    if (r <= 0)
      throw std::runtime_error("gguf '" + path_ + "': reading the header at offset " + std::to_string(pos_) + ": " +
                               (r < 0 ? std::strerror(errno) : "unexpected end of file"));
    buf_len_ = static_cast<size_t>(r), buf_pos_ = 0;
  }

  int fd_;
  uint64_t size_;
  const std::string& path_;
  uint64_t pos_ = 0;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(1 << 16);
  size_t buf_len_ = 0, buf_pos_ = 0;
};

// The fewest bytes one value of type `t` takes, to refuse absurd array counts before allocating.
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::STRING:
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
      return 8;
    case GgufType::ARRAY:
      return 12;  // element type + count
  }
  return 1;
}

bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

GgufValue read_value(HeaderReader& r, GgufType t, const std::string& key, const std::string& path, int depth) {
  GgufValue v;
  v.type = t;
  const char* what = "a metadata value";
  switch (t) {
    case GgufType::UINT8:
      v.value = uint64_t{r.get<uint8_t>(what)};
      break;
    case GgufType::INT8:
      v.value = int64_t{r.get<int8_t>(what)};
      break;
    case GgufType::UINT16:
      v.value = uint64_t{r.get<uint16_t>(what)};
      break;
    case GgufType::INT16:
      v.value = int64_t{r.get<int16_t>(what)};
      break;
    case GgufType::UINT32:
      v.value = uint64_t{r.get<uint32_t>(what)};
      break;
    case GgufType::INT32:
      v.value = int64_t{r.get<int32_t>(what)};
      break;
    case GgufType::UINT64:
      v.value = r.get<uint64_t>(what);
      break;
    case GgufType::INT64:
      v.value = r.get<int64_t>(what);
      break;
    case GgufType::FLOAT32:
      v.value = double{r.get<float>(what)};
      break;
    case GgufType::FLOAT64:
      v.value = r.get<double>(what);
      break;
    case GgufType::BOOL:
      v.value = r.get<uint8_t>(what) != 0;
      break;
    case GgufType::STRING:
      v.value = r.string(what);
      break;
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        throw std::runtime_error("gguf '" + path + "': key '" + key + "': arrays nested deeper than " +
                                 std::to_string(kMaxArrayDepth));
      const uint32_t et = r.get<uint32_t>("an array's element type");
      if (!known_type(et))
        throw std::runtime_error("gguf '" + path + "': key '" + key + "': unknown array element type " +
                                 std::to_string(et));
      v.array_type = static_cast<GgufType>(et);
      const uint64_t count = r.get<uint64_t>("an array's length");
      if (count > r.left() / min_value_bytes(v.array_type))
        throw std::runtime_error("gguf '" + path + "': key '" + key + "': array of " + std::to_string(count) + " " +
                                 gguf_type_name(v.array_type) +
                                 " runs past the end of the file: a corrupt or truncated file");
      GgufValue::Array a;
      a.reserve(count);
      for (uint64_t i = 0; i < count; ++i) a.push_back(read_value(r, v.array_type, key, path, depth + 1));
      v.value = std::move(a);
      break;
    }
  }
  return v;
}

std::string range_str(int64_t begin, int64_t n) {
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on "[" + std::string&&.
  std::string s = "[";
  s += std::to_string(begin);
  s += ", ";
  if (begin >= 0 && n >= 0 && n <= std::numeric_limits<int64_t>::max() - begin) {
    s += std::to_string(begin + n);
  } else {
    s += std::to_string(begin) + " + " + std::to_string(n);
  }
  s += ")";
  return s;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static constexpr const char* names[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                          "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  const auto i = static_cast<uint32_t>(t);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

std::optional<int64_t> GgufValue::as_int() const {
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&value))
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(*u);
  return std::nullopt;
}
std::optional<double> GgufValue::as_float() const {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&value)) return static_cast<double>(*u);
  return std::nullopt;
}
std::optional<bool> GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  return std::nullopt;
}
const std::string* GgufValue::as_string() const { return std::get_if<std::string>(&value); }
const GgufValue::Array* GgufValue::as_array() const { return std::get_if<Array>(&value); }

GgufFile::GgufFile(std::string path) : path_(std::move(path)) {}

GgufFile::~GgufFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile(path));  // owns the fd from here, even if parse throws
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) f->fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(f->fd_, &st) != 0) f->fail(std::string("cannot stat: ") + std::strerror(errno));
  f->file_size_ = static_cast<uint64_t>(st.st_size);
  f->parse();
  return f;
}

void GgufFile::fail(const std::string& what) const { throw std::runtime_error("gguf '" + path_ + "': " + what); }

void GgufFile::parse() {
  HeaderReader r(fd_, file_size_, path_);
  char magic[4];
  r.read(magic, 4, "the magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) fail("not a GGUF file (bad magic; the file starts with something else)");
  version_ = r.get<uint32_t>("the version");
  if (version_ != 2 && version_ != 3) {
    const bool swapped = version_ == 0x02000000u || version_ == 0x03000000u;
    fail("unsupported GGUF version " + std::to_string(version_) +
         (swapped ? " (a big-endian file; ztrain reads little-endian GGUF)" : " (ztrain reads versions 2 and 3)"));
  }
  const uint64_t n_tensors = r.get<uint64_t>("the tensor count");
  const uint64_t n_kv = r.get<uint64_t>("the metadata count");
  // A tensor info takes at least 24 bytes (name length, n_dims, type, offset); a key-value 13.
  // Checked before anything is reserved for them, so a corrupt count is not an allocation.
  const auto check_count = [&](uint64_t count, uint64_t min_bytes, const char* what) {
    if (count > r.left() / min_bytes)
      fail(std::string("absurd ") + what + " count " + std::to_string(count) + ": the rest of the file (" +
           std::to_string(r.left()) + " bytes) cannot hold them (a corrupt or truncated file)");
  };
  check_count(n_tensors, 24, "tensor");
  check_count(n_kv, 13, "metadata");

  meta_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("a metadata key");
    const uint32_t t = r.get<uint32_t>("a metadata value type");
    if (!known_type(t)) fail("key '" + key + "': unknown value type " + std::to_string(t));
    GgufValue v = read_value(r, static_cast<GgufType>(t), key, path_, 0);
    if (!meta_index_.emplace(key, meta_.size()).second) fail("duplicate key '" + key + "'");
    meta_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = meta("general.alignment")) {
    // ggml insists on UINT32 here; any integer type is taken, but not a zero or a non-power of 2.
    const auto v = a->as_int();
    if (!v || *v <= 0 || (*v & (*v - 1)) != 0)
      fail("general.alignment must be a power of two, not " +
           (v ? std::to_string(*v) : std::string("a ") + gguf_type_name(a->type)));
    alignment_ = static_cast<uint64_t>(*v);
  }

  entries_.reserve(n_tensors);
  data_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorFileEntry e;
    e.name = r.string("a tensor name");
    e.file = path_;
    const uint32_t n_dims = r.get<uint32_t>("a tensor's n_dims");
    if (n_dims > kMaxDims) fail("tensor '" + e.name + "' has " + std::to_string(n_dims) + " dimensions; GGUF allows 4");
    e.shape.resize(n_dims);
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = r.get<uint64_t>("a tensor's dimensions");
      const auto lim = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      if (dim > lim || (dim != 0 && static_cast<uint64_t>(numel) > lim / dim))
        fail("tensor '" + e.name + "' has absurd dimensions (dimension " + std::to_string(dim) + ")");
      e.shape[n_dims - 1 - d] = static_cast<int64_t>(dim);  // the file lists the innermost first
      numel *= static_cast<int64_t>(dim);
    }
    const uint32_t type = r.get<uint32_t>("a tensor's type");
    const uint64_t offset = r.get<uint64_t>("a tensor's offset");
    const GgmlType* gt = ggml_type(type);
    if (!gt) fail("tensor '" + e.name + "' has unknown ggml type " + std::to_string(type));
    e.dtype = gt->name;
    const int64_t row = n_dims ? e.shape.back() : 1;
    if (row % gt->block != 0)
      fail("tensor '" + e.name + "' is " + gt->name + " with rows of " + std::to_string(row) + " elements; " +
           gt->name + " stores rows in whole blocks of " + std::to_string(gt->block));
    const uint64_t blocks = static_cast<uint64_t>(numel) / gt->block;
    if (blocks > std::numeric_limits<uint64_t>::max() / gt->bytes) fail("tensor '" + e.name + "' is absurdly large");
    if (!index_.emplace(e.name, entries_.size()).second) fail("duplicate tensor name '" + e.name + "'");
    data_.push_back({type, offset, blocks * gt->bytes, numel});
    entries_.push_back(std::move(e));
  }

  // The data section starts at the aligned end of the header; each tensor's offset is relative to it.
  // As llama.cpp requires (ggml's gguf reader), the tensors' data lie one after another in the
  // order they are listed, each padded to the alignment: an offset anywhere else would read
  // another tensor's bytes (two tensors overlapping) or leave bytes no tensor owns.
  data_offset_ = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  uint64_t expected = 0;  // where the next tensor's data must start
  for (size_t i = 0; i < data_.size(); ++i) {
    TensorData& d = data_[i];
    const std::string& name = entries_[i].name;
    if (d.offset % alignment_ != 0)
      fail("tensor '" + name + "' has offset " + std::to_string(d.offset) + ", not a multiple of the alignment " +
           std::to_string(alignment_));
    const uint64_t room = file_size_ > data_offset_ ? file_size_ - data_offset_ : 0;
    if (d.offset > room || d.nbytes > room - d.offset)
      fail("truncated: tensor '" + name + "' (" + entries_[i].dtype + ", " + std::to_string(d.nbytes) +
           " bytes at data offset " + std::to_string(d.offset) + ") runs past the end of the file (" +
           std::to_string(file_size_) + " bytes, data from " + std::to_string(data_offset_) + ")");
    if (d.offset != expected)
      fail("tensor '" + name + "' has data offset " + std::to_string(d.offset) + ", expected " + std::to_string(expected) +
           (i == 0 ? std::string(" (the first tensor's)") : " (the end of '" + entries_[i - 1].name + "', padded to the alignment)") +
           ": GGUF tensors lie one after another in the order listed, as llama.cpp requires; this one " +
           (d.offset < expected ? "overlaps an earlier tensor's data" : "lies further on: out of order, over a later tensor's data or after a gap"));
    expected = d.offset + (d.nbytes + alignment_ - 1) / alignment_ * alignment_;  // within the file: checked above
    d.offset += data_offset_;
  }
}

const TensorFileEntry* GgufFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void GgufFile::read_f32(const std::string& name, int64_t begin, int64_t n, float* out) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail("no tensor '" + name + "'");
  const TensorData& d = data_[it->second];
  const std::string& dtype = entries_[it->second].dtype;
  if (begin < 0 || n < 0 || begin > d.numel || n > d.numel - begin)
    fail("tensor '" + name + "': elements " + range_str(begin, n) + " are outside its " + std::to_string(d.numel));
  if (d.type != kF32 && d.type != kF16 && d.type != kBF16 && d.type != kQ8_0 && d.type != kQ4_0 && d.type != kQ4_1)
    fail("tensor '" + name + "' is " + dtype + "; ztrain dequantizes F32, F16, BF16, Q8_0, Q4_0 and Q4_1");
  if (n == 0) return;

  // Reads `bytes` at file offset `at` into dst, whole or not at all.
  const auto pread_all = [&](void* dst, uint64_t bytes, uint64_t at) {
    auto* p = static_cast<uint8_t*>(dst);
    while (bytes > 0) {
      const ssize_t r = ::pread(fd_, p, std::min<uint64_t>(bytes, 1u << 30), static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        fail("tensor '" + name + "': short read at byte " + std::to_string(at) + ": " +
             (r < 0 ? std::strerror(errno) : "end of file (was it truncated since it was opened?)"));
      p += r, at += static_cast<uint64_t>(r), bytes -= static_cast<uint64_t>(r);
    }
  };

  const GgmlType& gt = kGgmlTypes[d.type];
  if (d.type == kF32) {
    pread_all(out, static_cast<uint64_t>(n) * 4, d.offset + static_cast<uint64_t>(begin) * 4);
    return;
  }
  // Everything else goes through a bounded staging buffer, a chunk of blocks at a time.
  constexpr uint64_t kChunkBytes = 1 << 20;
  const uint64_t first = static_cast<uint64_t>(begin) / gt.block;
  const uint64_t last = static_cast<uint64_t>(begin + n - 1) / gt.block;  // inclusive
  const uint64_t per_chunk = kChunkBytes / gt.bytes;
  std::vector<uint8_t> buf(std::min(last - first + 1, per_chunk) * gt.bytes);
  for (uint64_t b0 = first; b0 <= last; b0 += per_chunk) {
    const uint64_t nb = std::min(last + 1 - b0, per_chunk);
    pread_all(buf.data(), nb * gt.bytes, d.offset + b0 * gt.bytes);
    for (uint64_t b = 0; b < nb; ++b) {
      const uint8_t* src = buf.data() + b * gt.bytes;
      const int64_t e0 = static_cast<int64_t>((b0 + b) * gt.block);  // the block's first element
      if (gt.block == 1) {
        const uint16_t h = load_u16(src);
        out[e0 - begin] = d.type == kF16 ? f16_to_f32(h) : bf16_to_f32(h);
        continue;
      }
      float y[32];
      if (d.type == kQ4_0)
        dequant_q4_0(src, y);
      else if (d.type == kQ4_1)
        dequant_q4_1(src, y);
      else
        dequant_q8_0(src, y);
      const int64_t lo = std::max(e0, begin), hi = std::min(e0 + 32, begin + n);
      std::copy(y + (lo - e0), y + (hi - e0), out + (lo - begin));
    }
  }
}

const GgufValue* GgufFile::meta(const std::string& key) const {
  const auto it = meta_index_.find(key);
  return it == meta_index_.end() ? nullptr : &meta_[it->second].second;
}

void GgufFile::wrong_type(const std::string& key, const GgufValue& v, const char* want) const {
  std::string have = gguf_type_name(v.type);
  if (v.type == GgufType::ARRAY) have += std::string(" of ") + gguf_type_name(v.array_type);
  fail("key '" + key + "' is " + have + ", expected " + want);
}

std::optional<int64_t> GgufFile::meta_int(const std::string& key) const {
  const GgufValue* v = meta(key);
  if (!v) return std::nullopt;
  if (const auto i = v->as_int()) return i;
  if (std::holds_alternative<uint64_t>(v->value)) fail("key '" + key + "' does not fit int64");
  wrong_type(key, *v, "an integer");
}
std::optional<double> GgufFile::meta_float(const std::string& key) const {
  const GgufValue* v = meta(key);
  if (!v) return std::nullopt;
  if (const auto f = v->as_float()) return f;
  wrong_type(key, *v, "a number");
}
std::optional<bool> GgufFile::meta_bool(const std::string& key) const {
  const GgufValue* v = meta(key);
  if (!v) return std::nullopt;
  if (const auto b = v->as_bool()) return b;
  wrong_type(key, *v, "a BOOL");
}
std::optional<std::string> GgufFile::meta_string(const std::string& key) const {
  const GgufValue* v = meta(key);
  if (!v) return std::nullopt;
  if (const auto* s = v->as_string()) return *s;
  wrong_type(key, *v, "a STRING");
}
const GgufValue::Array* GgufFile::meta_array(const std::string& key) const {
  const GgufValue* v = meta(key);
  if (!v) return nullptr;
  if (const auto* a = v->as_array()) return a;
  wrong_type(key, *v, "an ARRAY");
}

std::optional<std::vector<std::string>> GgufFile::meta_strings(const std::string& key) const {
  const GgufValue::Array* a = meta_array(key);
  if (!a) return std::nullopt;
  if (meta(key)->array_type != GgufType::STRING) wrong_type(key, *meta(key), "an ARRAY of STRING");
  std::vector<std::string> out;
  out.reserve(a->size());
  for (const GgufValue& v : *a) out.push_back(*v.as_string());
  return out;
}
std::optional<std::vector<int64_t>> GgufFile::meta_ints(const std::string& key) const {
  const GgufValue::Array* a = meta_array(key);
  if (!a) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(a->size());
  for (const GgufValue& v : *a) {
    const auto i = v.as_int();
    if (!i) wrong_type(key, *meta(key), "an ARRAY of integers (that fit int64)");
    out.push_back(*i);
  }
  return out;
}
std::optional<std::vector<double>> GgufFile::meta_floats(const std::string& key) const {
  const GgufValue::Array* a = meta_array(key);
  if (!a) return std::nullopt;
  std::vector<double> out;
  out.reserve(a->size());
  for (const GgufValue& v : *a) {
    const auto f = v.as_float();
    if (!f) wrong_type(key, *meta(key), "an ARRAY of numbers");
    out.push_back(*f);
  }
  return out;
}

}  // namespace zt
