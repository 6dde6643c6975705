// GgufFile: a GGUF file (llama.cpp's format, versions 2 and 3, little-endian) as a TensorFile,
// plus its metadata, which the model adapter (llama.* dimensions) and a tokenizer
// (tokenizer.ggml.*) read. The header, metadata included, is parsed once at open through a
// buffered reader; tensor data is read only on demand, with pread of the blocks that cover the
// asked range, so a rank reading its shard never touches the rest of the file.
//
// [Note: GGUF layout] magic "GGUF", u32 version, u64 tensor_count, u64 kv_count; kv_count
// (string key, u32 value type, value); tensor_count (string name, u32 n_dims, u64 dims innermost
// first, u32 ggml type, u64 offset); padding to `general.alignment` (default 32), then the data
// section, each tensor at data start + offset. Strings are u64 length + bytes (no NUL). A
// quantized ggml type stores each row in blocks of 32 (Q4_0, Q4_1, Q8_0) or 256 (the K-quants)
// elements; read_f32 dequantizes F32, F16, BF16, Q8_0, Q4_0 and Q4_1 with ggml's arithmetic
// (dequantize_row_* in ggml-quants.c; gguf-py's quants.py) and refuses the others by name.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "files/tensor_file.hpp"

namespace zt {

// GGUF's metadata value types, with the file's ids.
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Integers keep their signedness (signed types as int64, unsigned as uint64)
// so a UINT64 above INT64_MAX is not silently wrapped; floats are widened to double.
struct GgufValue {
  using Array = std::vector<GgufValue>;
  GgufType type = GgufType::UINT8;        // as the file stores it
  GgufType array_type = GgufType::UINT8;  // the elements' type, for an ARRAY (empty ones too)
  std::variant<int64_t, uint64_t, double, bool, std::string, Array> value;

  // Any integer type whose value fits int64; otherwise nullopt (strings are not parsed).
  std::optional<int64_t> as_int() const;
  // FLOAT32/FLOAT64, and integers widened (a freq_base written as an int is still a number).
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;  // nullptr unless STRING
  const Array* as_array() const;         // nullptr unless ARRAY
};

class GgufFile final : public TensorFile {
 public:
  // Parses and checks the header; throws std::runtime_error naming the file (and the tensor or
  // key) on a bad magic, an unsupported version, counts or lengths beyond the file, a truncated
  // header or tensor, an unknown ggml type, a misaligned offset, or a quantized tensor whose
  // rows are not whole blocks.
  static std::unique_ptr<GgufFile> open(const std::string& path);

  const std::vector<TensorFileEntry>& entries() const override { return entries_; }
  const TensorFileEntry* find(const std::string& name) const override;
  // Refuses ggml types other than F32, F16, BF16, Q8_0, Q4_0 and Q4_1, naming the type.
  void read_f32(const std::string& name, int64_t begin, int64_t n, float* out) const override;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section begins

  // Every key, in the file's order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return meta_; }
  // The value under `key`, or nullptr.
  const GgufValue* meta(const std::string& key) const;
  // The typed getters give nullopt (nullptr) for an absent key and throw std::runtime_error,
  // naming the file and the key, for a present key of another type: a model whose
  // llama.block_count is a string is a broken file, not a missing setting.
  std::optional<int64_t> meta_int(const std::string& key) const;
  std::optional<double> meta_float(const std::string& key) const;
  std::optional<bool> meta_bool(const std::string& key) const;
  std::optional<std::string> meta_string(const std::string& key) const;
  const GgufValue::Array* meta_array(const std::string& key) const;
  // Arrays of one kind, copied out (tokenizer.ggml.tokens, .merges, .token_type, .scores).
  std::optional<std::vector<std::string>> meta_strings(const std::string& key) const;
  std::optional<std::vector<int64_t>> meta_ints(const std::string& key) const;
  std::optional<std::vector<double>> meta_floats(const std::string& key) const;

  ~GgufFile() override;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

 private:
  struct TensorData {
    uint32_t type;    // ggml type id
    uint64_t offset;  // absolute, in the file
    uint64_t nbytes;
    int64_t numel;
  };
  explicit GgufFile(std::string path);
  void parse();
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void wrong_type(const std::string& key, const GgufValue& v, const char* want) const;

  std::string path_;
  int fd_ = -1;  // owned: closed by the destructor
  uint64_t file_size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> meta_;
  std::unordered_map<std::string, size_t> meta_index_;
  std::vector<TensorFileEntry> entries_;
  std::vector<TensorData> data_;  // parallel to entries_
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace zt
