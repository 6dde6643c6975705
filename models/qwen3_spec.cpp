// Qwen3 (dense, Qwen3ForCausalLM): Llama's block with RMSNorm over each q and k head before RoPE
// (LlamaVariant::qk_norm), no biases, its embedding tied or not ([Note: a new model] in
// models/model.hpp).
#include <nlohmann/json.hpp>

#include "models/llama.hpp"
#include "models/model_spec.hpp"

namespace zt {

ModelSpec qwen3_spec() {
  ModelSpec s = llama_family_spec({.arch = "qwen3", .qk_norm = true});
  s.family = "Qwen3";
  // q, k and v carry no biases (Qwen3's attention_bias adds o_proj's too, which is not modelled).
  s.has_dim = [](std::string_view key) { return key != "attention_bias" && !local_attention_dim(key); };
  s.hf_architectures = {"Qwen3ForCausalLM"};
  s.hf_config = [](const ModelDims& d) { return llama_family_hf_config(d, "Qwen3ForCausalLM", "qwen3"); };
  s.gguf_architectures = {"qwen3"};
  s.peer_args = [](const ModelDims& d) { return llama_family_peer_args(d, "qwen3"); };
  return s;
}

}  // namespace zt
