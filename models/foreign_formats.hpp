// Checkpoints other tools wrote, as the runtime sees them: a Hugging Face model folder
// (models/hf_format.hpp) or a GGUF file (models/gguf_format.hpp). The runtime reaches them only
// through here, by path, and names neither format nor model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "models/model.hpp"

namespace zt {

struct ForeignCheckpoint {
  std::string format;  // "hf" or "gguf"
  std::string arch;
  ModelDims dims;
};
// nullopt for a path that is neither a folder holding config.json nor a GGUF file; errors
// (std::runtime_error) naming the file for one that is, but cannot be read.
std::optional<ForeignCheckpoint> read_foreign_checkpoint(const std::string& path);

// An opened foreign checkpoint, checked against `model` (every tensor present with the model's
// shape, and none the model would drop), from which any element range of a unit reads as f32.
class ForeignWeights {
 public:
  virtual ~ForeignWeights() = default;
  // Elements [begin, end) of unit u's flat buffer into out[0, end - begin).
  virtual void read_unit_range(int u, int64_t begin, int64_t end, float* out) const = 0;
};
std::unique_ptr<ForeignWeights> open_foreign_weights(const std::string& path, const Model& model);

// A Hugging Face folder's config.json for the model, as transformers reads it back
// (LlamaForCausalLM, or Qwen2ForCausalLM for q/k/v biases; GPT2LMHeadModel for gpt2);
// torch_dtype "float32", "bfloat16" or "float16" as the weights are stored.
std::string hf_config_json(const Model& model, const std::string& torch_dtype);

}  // namespace zt
