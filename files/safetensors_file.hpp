// Hugging Face safetensors files as a TensorFile (files/tensor_file.hpp): one `.safetensors` file,
// or a sharded set through its `model.safetensors.index.json`. F32, BF16 and F16 read as f32 (the
// widening is exact); tensors of other dtypes are listed but not read.
#pragma once

#include <memory>
#include <string>

#include "files/tensor_file.hpp"

namespace zt {

// `path` ending in ".json" is a sharded index ({"weight_map": {tensor: shard file}}, the shards in
// the index's folder); anything else is one safetensors file. Every header is read and checked
// here, and every shard opened, so a bad or truncated file fails now, not at its first read.
// Errors (std::runtime_error) name the file and, where there is one, the tensor.
std::unique_ptr<TensorFile> open_safetensors(const std::string& path);

// Whether `path` is a file that begins as a safetensors file does (a little-endian u64 header
// length, then the header's '{'), whatever its name.
bool is_safetensors_file(const std::string& path);

}  // namespace zt
