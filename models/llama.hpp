// The Llama family (Llama 2/3, Qwen2/2.5, Mistral, SmolLM2) as units, with Hugging Face's names
// and layouts: the token embedding cut into K row ranges, the L blocks, the final RMSNorm, then
// (untied) the output head cut into K row ranges as well. [Note: Llama's units]
//
// [Note: Llama's units] A block holds, in this order: input_layernorm, q_proj, k_proj, v_proj,
// (q/k/v biases with attention_bias), o_proj, post_attention_layernorm, gate_proj, up_proj,
// down_proj. q, k and v are adjacent (n_head + 2 n_kv_head head_dim rows of n_embd), so one GEMM
// reads them as the fused qkv weight the attention kernel takes; gate and up likewise make the
// [gate | up] input of SwiGLU. The embedding and an untied head are cut like GPT-2's wte ([Note:
// the tied embedding's units] in models/gpt2.hpp), with the same K, so each row range of the
// head is one column range of the logits; a tied head runs the embedding's units again.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/model.hpp"
#include "models/model_spec.hpp"

namespace zt {

// What sets a Llama-family architecture's block apart from Llama's own, each a feature a spec
// switches on: Qwen3 normalises each q and k head (RMSNorm over head_dim, its q_norm and k_norm
// weights) before RoPE; Gemma 3 too, and every one of its RMSNorms scales by (1 + w) (weights
// initialised 0), it normalises the attention's and the MLP's outputs as well as their inputs
// (post_attention_layernorm becomes the attention output's, pre_feedforward_layernorm and
// post_feedforward_layernorm the MLP's), gates its MLP with tanh-GELU (GeGLU), and scales the
// token embeddings by sqrt(n_embd). Local attention (the dims' sliding_window) is the dims'.
struct LlamaVariant {
  std::string arch = "llama";
  bool qk_norm = false;
  float norm_offset = 0.0f;
  bool sandwich_norms = false;
  bool geglu = false;
  bool scaled_embedding = false;
};

// K of [Note: Llama's units]: the smallest dividing padded_vocab_size whose row range is no larger
// than a block.
int llama_embedding_units(const ModelDims& d, const LlamaVariant& v = {});
std::vector<UnitLayout> llama_layout(const ModelDims& d, const LlamaVariant& v = {}, int embedding_units = 0);
double llama_num_params_f64(const ModelDims& d, const LlamaVariant& v = {});
// RoPE's inverse frequencies (head_dim / 2 of them) as Hugging Face computes them, with Llama 3.1's
// scaling when rope_scaling.rope_type is "llama3".
std::vector<float> llama_inv_freq(const ModelDims& d);

// One block, [Note: Llama's units]: x + o_proj(attn(rope(qkv(rmsnorm(x))))), then
// + down_proj(swiglu(gate_up(rmsnorm(.)))), with the variant's features. `p` holds the block's
// parameters, `qkv` and `gate_up` their fused views, `qkv_bias` undefined without attention_bias;
// `lora`, where there are adapters, each projection's ([Note: LoRA units] in models/lora.hpp).
enum LlamaProjection { kQkvProjection, kOProjection, kGateUpProjection, kDownProjection };
struct LlamaBlockParams {
  const Tensor& input_norm;
  const Tensor& qkv;
  const Tensor& qkv_bias;
  const Tensor& o_proj;
  const Tensor& post_norm;
  const Tensor& gate_up;
  const Tensor& down_proj;
  const Tensor& q_norm;  // undefined without qk_norm
  const Tensor& k_norm;
  const Tensor& pre_ff_norm;  // undefined without sandwich_norms
  const Tensor& post_ff_norm;
  const BlockLora* lora = nullptr;
};
// qkv (...,(n_head+2 n_kv_head) head_dim) -> the same with each q head RMSNorm'd by q_norm and each
// k head by k_norm (head_dim each), v as it was: composed of narrow, reshape, rmsnorm and concat.
Tensor qk_rmsnorm(Tape& tape, const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const ModelDims& d,
                  float norm_offset);
// `sliding`: the layer attends within d.sliding_window (its inv_freq the local base's).
Tensor llama_block(Tape& tape, const LlamaBlockParams& p, const Tensor& x, const Tensor& inv_freq, const ModelDims& d,
                   const LlamaVariant& v, bool sliding, AttentionKernel attention);

// The spec every Llama-family architecture starts from (models/llama_spec.cpp), and the pieces its
// members share: the dims from a config.json (LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM, Qwen3ForCausalLM: std::runtime_error naming the key of what is not
// modelled), a config.json of the given class, and `ztrain bench`'s peer arguments.
ModelSpec llama_family_spec(const LlamaVariant& v);
ModelDims llama_family_dims_from_hf(const HfConfig& r);
nlohmann::json llama_family_hf_config(const ModelDims& d, const std::string& architecture, const std::string& model_type);
// What every member's config.json says alike: the widths, the vocabulary, the context, the
// tying, the norms' eps (read: the rest at their defaults; written: with the class and type).
ModelDims llama_family_widths_from_hf(const HfConfig& r);
void check_llama_family_heads(const HfConfig& r, const ModelDims& d);
nlohmann::json llama_family_hf_widths(const ModelDims& d, const std::string& architecture, const std::string& model_type);
std::vector<std::string> llama_family_peer_args(const ModelDims& d, const std::string& peer_arch);

class Llama final : public Model {
 public:
  // embedding_units: K of [Note: Llama's units]; 0 picks llama_embedding_units.
  explicit Llama(const ModelDims& d, int embedding_units = 0, const LlamaVariant& v = {});

  int final_unit() const { return embedding_units() + dims().n_layer; }
  // The untied head's row range k (tied: the embedding's).
  int head_unit(int k) const { return dims().tie_word_embeddings ? k : final_unit() + 1 + k; }

  double flops_per_token(int T) const override;
  int64_t deepspeed_largest_layer() const override;
  // The layout's order: every tensor's row ranges are consecutive units.
  void for_each_param_in_file_order(const std::function<void(int unit, int index)>& f) const override;

 protected:
  Tensor embed(Tape& tape, const Tensor& host_tokens) override;
  Tensor block(Tape& tape, int layer, const Tensor& x) override;
  std::vector<Tensor> head(Tape& tape, const Tensor& x) override;

 private:
  struct Resolved {};
  Llama(const ModelDims& d, const LlamaVariant& v, int K, Resolved);
  // inv_freq (the global layers', or with `local` the sliding ones') on the parameters' device,
  // made once per device.
  const Tensor& inv_freq_on(const Tensor& like, bool local);

  LlamaVariant variant_;
  std::vector<float> inv_freq_host_[2];
  Tensor inv_freq_[2];
};

}  // namespace zt
