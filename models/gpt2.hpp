// GPT-2 in llm.c's parameter layout, written as units: the token embedding wte split by rows into
// K units (unit 0 also holds the position embedding wpe), then the L transformer blocks, then the
// final layernorm. [Note: the tied embedding's units] [Note: units and llm.c's order]
//
// [Note: the tied embedding's units] wte is GPT-2's largest tensor (39M of the 124M parameters)
// and the LM head is tied to it, so a ZeRO-3 unit holding all of it would be gathered, with its
// full gradients, from the head's backward to the embedding's: far more than any block. It is
// therefore cut into K row ranges, each a unit no larger than a block (K divides
// padded_vocab_size; gpt2_wte_units picks the smallest such K). Each wte unit runs twice in the
// forward pass: adding its rows to the embedding (tokens outside its range take zeros), and as one
// column range of the head's logits. The cross-entropy reads the K logit parts as one row.
//
// [Note: units and llm.c's order] llm.c stores each parameter kind for all layers together (all
// ln1w, then all ln1b, ...). A ZeRO unit needs one block's parameters in one flat buffer, so in
// memory each block's tensors are contiguous, in llm.c's per-layer order; the checkpoint reader
// and writer map between the two orders.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/model.hpp"

namespace zt {

using GPT2Dims = ModelDims;  // GPT-2's dimensions are exactly ModelDims' fields

// The smallest K dividing padded_vocab_size for which a K-th of wte is no larger than a block.
int gpt2_wte_units(const ModelDims& d);
// wte_units: K of [Note: the tied embedding's units]; 0 picks gpt2_wte_units.
std::vector<UnitLayout> gpt2_layout(const ModelDims& d, int wte_units = 0);
int64_t gpt2_num_params(const ModelDims& d);
// The same count in floating point, for dimensions whose int64 count would overflow (a header's,
// a config's) before they are refused.
double gpt2_num_params_f64(const ModelDims& d);
// DeepSpeed's "largest layer" of GPT-2: the most parameters one torch module holds itself, among
// the token embedding (Vp x C), the position embedding (maxT x C), c_attn (3C x C + 3C), c_fc
// (4C x C + 4C), the projections and layernorms.
int64_t gpt2_deepspeed_largest_layer(const ModelDims& d);
// Training FLOPs per token, llm.c's count: 6 per parameter plus 6*L*C*T for attention.
double gpt2_flops_per_token(const ModelDims& d, int T);

// One transformer block: x + attn(ln1(x)), then + mlp(ln2(.)); `p` holds the block's 12 tensors
// in llm.c's order (ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw,
// fcprojb); `lora`, where there are adapters, each projection's ([Note: LoRA units] in
// models/lora.hpp).
enum Gpt2Projection { kAttnProjection, kAttnOutProjection, kFcProjection, kFcOutProjection };
Tensor gpt2_block(Tape& tape, std::span<const Tensor> p, const Tensor& x, int n_head, AttentionKernel attention,
                  const BlockLora* lora = nullptr);

class GPT2 final : public Model {
 public:
  // wte_units: K of [Note: the tied embedding's units]; 0 picks gpt2_wte_units.
  explicit GPT2(const ModelDims& d, int wte_units = 0);

  int wte_units() const { return embedding_units(); }  // units 0..K-1; the blocks follow

  double flops_per_token(int T) const override { return gpt2_flops_per_token(dims(), T); }
  int64_t deepspeed_largest_layer() const override { return gpt2_deepspeed_largest_layer(dims()); }
  // llm.c's order: wte, wpe, all ln1w, all ln1b, ... [Note: units and llm.c's order]
  void for_each_param_in_file_order(const std::function<void(int unit, int index)>& f) const override;

 protected:
  Tensor embed(Tape& tape, const Tensor& host_tokens) override;
  Tensor block(Tape& tape, int layer, const Tensor& x) override;
  std::vector<Tensor> head(Tape& tape, const Tensor& x) override;

 private:
  struct Resolved {};  // K resolved and the dimensions checked: the layout is built once
  GPT2(const ModelDims& d, int K, Resolved);
};

}  // namespace zt
