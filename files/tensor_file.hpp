// TensorFile: the named tensors of a checkpoint another tool wrote (Hugging Face safetensors, a
// sharded safetensors index, GGUF), read as f32 a range of elements at a time. A rank starting a
// sharded model from such a file reads only the bytes that cover its own part of each tensor
// (pread at the tensor's offset), never the whole file. The model's adapters for a format
// (which names and layouts go where) sit above this; a TensorFile knows only the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace zt {

struct TensorFileEntry {
  std::string name;   // as the file names it
  Shape shape;        // row-major, outermost first (GGUF's reversed dimensions already turned)
  std::string dtype;  // as the file names it: "F32", "BF16", "F16" (safetensors), "Q4_1", ... (GGUF)
  std::string file;   // the file holding it (one of a sharded set's), for error messages
};

class TensorFile {
 public:
  virtual ~TensorFile() = default;
  // Every tensor, in the file's order.
  virtual const std::vector<TensorFileEntry>& entries() const = 0;
  // The entry named `name`, or nullptr.
  virtual const TensorFileEntry* find(const std::string& name) const = 0;
  // Elements [begin, begin + n) of tensor `name` in row-major order, widened or dequantized to
  // f32 into out[0, n). Errors (std::runtime_error) name the file and the tensor: an unknown
  // name, a range outside the tensor, a short read.
  virtual void read_f32(const std::string& name, int64_t begin, int64_t n, float* out) const = 0;
};

}  // namespace zt
