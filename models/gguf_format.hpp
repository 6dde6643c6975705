// GGUF files (llama.cpp's) as a Llama-family checkpoint: the architecture's dimensions from the
// metadata (<arch>.block_count, .embedding_length, ...), llama.cpp's tensor names (token_embd,
// blk.N.attn_q, ...), and the rows of q and k un-permuted: llama.cpp's converter stores each
// head's rows interleaved for its own RoPE (pairs 2i, 2i+1), where Hugging Face's, and ztrain's,
// rotates halves (i, i + head_dim/2). Quantized tensors are dequantized to f32 by the reader.
#pragma once

#include <string>

#include "models/file_weights.hpp"
#include "files/gguf_file.hpp"

namespace zt {

// A file starting with GGUF's magic.
bool is_gguf_file(const std::string& path);

struct GgufModel {
  std::string arch;  // ztrain's: the spec whose gguf_architectures name general.architecture
  ModelDims dims;
  bool permuted_qk;  // llama.cpp's converter permuted q and k (its "llama" architecture; not "qwen2", "qwen3")
};
// std::runtime_error naming the file and key: an architecture no spec reads, a
// missing dimension, a RoPE scaling (rope_freqs) ztrain does not read.
GgufModel read_gguf_model(const GgufFile& f);

FileTensorMap gguf_tensor_map(const GgufModel& m);
void check_gguf_tensors(const GgufFile& f, const GgufModel& gm, const Model& model);

}  // namespace zt
