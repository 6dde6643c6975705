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
#include <string>
#include <vector>

#include "models/gpt2_dims.hpp"
#include "tensor/tape.hpp"
#include "tensor/tensor.hpp"

namespace zt {

struct ParamSpec {
  std::string name;  // llm.c's, e.g. "qkvw"; unique with the layer and row0
  int layer;         // -1 outside the blocks
  Shape shape;
  int64_t offset;    // within the unit's flat buffer
  bool decay;        // weight decay applies (matrices and embeddings, as in llm.c)
  int tensor = 0;    // the model tensor's number (the row ranges of wte share one), its init stream
  int64_t row0 = 0;  // the first row of the model tensor this holds (wte's units)
};

struct UnitLayout {
  std::string name;  // "embedding", "block3", "final"
  std::vector<ParamSpec> params;
  int64_t numel = 0;
};

std::string dims_str(const GPT2Dims& d);  // "n_layer 12, n_head 12, ..."
// The smallest K dividing padded_vocab_size for which a K-th of wte is no larger than a block.
int gpt2_wte_units(const GPT2Dims& d);
// wte_units: K of [Note: the tied embedding's units]; 0 picks gpt2_wte_units.
std::vector<UnitLayout> gpt2_layout(const GPT2Dims& d, int wte_units = 0);
int64_t gpt2_num_params(const GPT2Dims& d);
// The same count in floating point, for dimensions whose int64 count would overflow (a header's,
// a config's) before they are refused.
double gpt2_num_params_f64(const GPT2Dims& d);
// DeepSpeed's "largest layer" of GPT-2 (model_to_params in deepspeed/runtime/zero/stage3.py): the
// most parameters one torch module holds itself, among the token embedding (Vp x C), the position
// embedding (maxT x C), c_attn (3C x C + 3C), c_fc (4C x C + 4C), the projections and layernorms.
int64_t gpt2_deepspeed_largest_layer(const GPT2Dims& d);
// Training FLOPs per token, llm.c's count: 6 per parameter plus 6*L*C*T for attention.
double gpt2_flops_per_token(const GPT2Dims& d, int T);

class GPT2 {
 public:
  // wte_units: K of [Note: the tied embedding's units]; 0 picks gpt2_wte_units.
  explicit GPT2(const GPT2Dims& d, int wte_units = 0);

  const GPT2Dims& dims() const { return dims_; }
  const std::vector<UnitLayout>& layout() const { return layout_; }
  int num_units() const { return static_cast<int>(layout_.size()); }
  int wte_units() const { return wte_units_; }  // units 0..K-1; the blocks follow

  // Points unit u's parameter tensors at views of `params` (numel of the unit) and, if defined,
  // their gradients at views of `grads`; parameters then require grad. The buffers are owned by
  // the caller (trainer or ZeRO engine).
  void bind_unit(int u, const Tensor& params, const Tensor& grads);
  const Tensor& param(int u, int i) const { return bound_.at(u).at(i); }

  // GPT-2 initialisation into bound buffers: normal(0, 0.02), residual projections scaled by
  // 1/sqrt(2L), biases 0, layernorm weights 1; the padded vocabulary rows stay 0.
  void init(uint64_t seed);
  // The same values for one unit alone (every tensor draws from its own stream), so a sharded
  // engine can initialise unit by unit without holding the whole model.
  void init_unit(int u, uint64_t seed);

  // tokens, targets (B,T) i32 on the host -> mean loss (targets == -1 ignored), a host scalar.
  // Computes where the bound parameters live (their device and dtype). Records on the tape.
  Tensor forward(Tape& tape, const Tensor& tokens, const Tensor& targets);
  // tokens (B,T) -> logits (B,T,Vp) f32 on the host, for inference: the parts are joined without
  // autograd.
  Tensor logits(Tape& tape, const Tensor& tokens);

 private:
  Tensor hidden(Tape& tape, const Tensor& host_tokens);
  // The head's K column ranges of the logits, (B,T,Vp/K) each.
  std::vector<Tensor> logit_parts(Tape& tape, const Tensor& tokens);

  GPT2Dims dims_;
  int wte_units_;
  std::vector<UnitLayout> layout_;
  std::vector<std::vector<Tensor>> bound_;
};

// Parameters on any device and in any floating dtype, through the host in f32: store_f32 writes
// host f32 values into t (rounded to its dtype), host_f32 returns t's values (t itself when it is
// a host f32 tensor, else a copy).
void store_f32(const Tensor& t, const Tensor& host);
Tensor host_f32(const Tensor& t);

// Calls f(unit, index) for every parameter in llm.c's order (wte, wpe, all ln1w, all ln1b, ...).
void for_each_llmc_param(const GPT2& m, const std::function<void(int unit, int index)>& f);

// llm.c checkpoints: 256 int32 header (magic 20240326, version 3 = fp32, maxT, V, L, NH, C, Vp),
// then every parameter in llm.c's order. Errors name the file and what is wrong.
GPT2Dims read_llmc_header(const std::string& path);
void load_llmc_checkpoint(const std::string& path, GPT2& model);
void save_llmc_checkpoint(const std::string& path, const GPT2& model);

}  // namespace zt
