// Model: what the runtime knows of a model. A model is its parameters cut into units (the ZeRO
// engine's sharding and gathering unit: the embedding's row ranges, each transformer block, the
// final norm), each unit one flat buffer whose tensors the model describes by ParamSpec, and its
// math: the embedding, a per-block function, and the head, run by forward() with the tape's unit
// markers around each ([Note: unit hooks] in tensor/tape.hpp). The runtime builds one through
// models/registry.hpp by `model.arch`, and names no concrete model.
//
// [Note: a new model] An architecture implements this interface in models/<arch>.{hpp,cpp}
// (layout with Hugging Face names and each tensor's initialisation, embed/block/head; the block a
// free function of the block's tensors, like gpt2_block), adds its dimensions to ModelDims if it
// has new ones, describes itself in a ModelSpec (models/model_spec.hpp) in
// models/<arch>_spec.cpp and lists that in models/registry.cpp. ZeRO, checkpoints, the config's
// checks, export to safetensors and Hugging Face folders, PEFT, the estimate and the trace then
// work on it unchanged. A variant of an existing block is an option of it (Qwen3 is Llama's with
// LlamaVariant::qk_norm).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "models/checkpointing.hpp"
#include "models/lora.hpp"
#include "models/model_dims.hpp"
#include "tensor/tape.hpp"
#include "tensor/tensor.hpp"

namespace zt {

// One tensor of a unit (or a row range of one: a tied embedding cut into units).
struct ParamSpec {
  std::string name;  // the model's own, e.g. GPT-2's llm.c "qkvw"; unique with the layer and row0
  int layer;         // -1 outside the blocks
  Shape shape;
  int64_t offset;      // within the unit's flat buffer
  bool decay;          // weight decay applies (matrices and embeddings)
  int tensor = 0;      // the model tensor's number (the row ranges of one share it), its init stream
  int64_t row0 = 0;    // the first row of the model tensor this holds
  // A frozen parameter has no gradient, master copy or optimizer state, and its weight-gradient
  // GEMM never runs; the ZeRO engine keeps it in a unit of frozen parameters only (LoRA freezes
  // the whole model: [Note: LoRA units] in models/lora.hpp).
  bool trainable = true;
  // Hugging Face's name and layout, for export: `hf_name` holds the model tensor's first
  // `hf_rows` rows (a padded vocabulary's extra rows are not in the file); `hf_transposed` for a
  // matrix stored (in, out), as GPT-2's Conv1D weights are.
  std::string hf_name;
  int64_t hf_rows = 0;
  bool hf_transposed = false;
  // Its initialisation, the module's own: normal(0, init_std) drawn for its first hf_rows rows
  // (a padded vocabulary's extra rows stay 0) where init_std > 0, else init_value everywhere
  // (a norm's weight 1, a bias 0).
  float init_std = 0.0f;
  float init_value = 0.0f;
};

// Adjacent parameters read as one tensor: matrices with the same columns stacked by rows (the
// Llama family's q, k and v projections as one GEMM's weight, gate and up as another), or vectors
// joined. The parameters stay separate for files and names; the math sees one operand.
struct FusedParam {
  int first;  // index of the first parameter in the unit
  int count;
};

struct UnitLayout {
  std::string name;  // "embedding", "block3", "final", "block3.lora"
  std::vector<ParamSpec> params;
  int64_t numel = 0;
  std::vector<FusedParam> fused;
  // An adapter unit's model unit, which it is gathered, run and reduced with ([Note: LoRA
  // units]); -1 for the model's own units.
  int runs_with = -1;
  // Every parameter frozen.
  bool frozen() const;
};

class Model {
 public:
  Model(std::string arch, const ModelDims& d, std::vector<UnitLayout> layout, int embedding_units);
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& arch() const { return arch_; }
  const ModelDims& dims() const { return dims_; }
  const std::vector<UnitLayout>& layout() const { return layout_; }
  // Every unit: the model's own, then the adapter units apply_lora adds.
  int num_units() const { return static_cast<int>(layout_.size()); }
  // The model's own units (those the tape brackets; file formats know only these).
  int base_units() const { return base_units_; }
  // Units 0..K-1 hold the token embedding's row ranges (the first also what else the embedding
  // has); the blocks follow, unit K + l for block l.
  int embedding_units() const { return embedding_units_; }
  int block_unit(int layer) const { return embedding_units_ + layer; }
  int64_t num_params() const;
  // Those of units that are not frozen (with LoRA: the adapters).
  int64_t num_trainable_params() const;

  // Points unit u's parameter tensors at views of `params` (numel of the unit) and, if defined,
  // their gradients at views of `grads`; parameters then require grad. The buffers are owned by
  // the caller (the ZeRO engine, or whoever loads weights).
  void bind_unit(int u, const Tensor& params, const Tensor& grads);
  const Tensor& param(int u, int i) const { return bound_.at(u).at(i); }
  const std::vector<Tensor>& unit_params(int u) const { return bound_.at(u); }
  // The unit's FusedParam i, bound with its parameters (and their gradients).
  const Tensor& fused(int u, int i) const { return fused_.at(u).at(i); }

  void init(uint64_t seed);
  // The initialisation of one unit alone (every tensor draws from its own stream), so a sharded
  // engine can initialise unit by unit without holding the whole model: the model's own
  // (init_base_unit), or PEFT's for an adapter unit.
  void init_unit(int u, uint64_t seed);

  // [Note: LoRA units] in models/lora.hpp: freezes the model and adds the adapter units. Before
  // any unit is bound. std::invalid_argument naming a bad setting (lora.target_modules, lora.r).
  void apply_lora(const LoraConfig& c);
  const LoraConfig& lora() const { return lora_; }
  // LoRA's dropout masks come from `stream` (the run's seed and the rank) and the number of the
  // training pass (each forward while the tape records: a micro-batch), `passes` of which are
  // done (a resumed run's), so a resume draws the masks the run that never stopped would have.
  void set_dropout_stream(uint64_t stream, uint64_t passes) { dropout_stream_ = stream, passes_ = passes; }
  // The adapters of unit u's parameters [first, first + count) (one weight, or a fused group whose
  // rows follow one another), bound: the terms adapted_linear adds. Empty without LoRA.
  LoraTerms lora_terms(int u, int first, int count) const;
  // Model unit u's weights with its adapters merged in, W += scale * B A (PEFT's merge_and_unload):
  // `params` is u's flat buffer (f32, host), `adapter(v)` adapter unit v's. Nothing without LoRA.
  void merge_lora(int u, float* params, const std::function<const float*(int unit)>& adapter) const;

  // tokens, targets (B,T) i32 on the host -> mean loss (targets == -1 ignored), a host scalar.
  // Computes where the bound parameters live (their device and dtype). Records on the tape.
  Tensor forward(Tape& tape, const Tensor& tokens, const Tensor& targets);
  // tokens (B,T) -> logits (B,T,Vp) f32 on the host, for inference: the parts are joined without
  // autograd.
  Tensor logits(Tape& tape, const Tensor& tokens);

  // Training FLOPs per token at sequence length T (6 per parameter plus attention's).
  virtual double flops_per_token(int T) const = 0;
  // DeepSpeed's "largest layer" (model_to_params in deepspeed/runtime/zero/stage3.py): the most
  // parameters one torch module of the Hugging Face model holds itself.
  virtual int64_t deepspeed_largest_layer() const = 0;

  // Calls f(unit, index) for every parameter in the model's file order (GPT-2: llm.c's), in which
  // the parameters, each whole (a tensor's row ranges in order), make one stream of floats
  // whatever the embedding's units: [Note: weights in file order] in runtime/checkpoint/weights.cpp.
  virtual void for_each_param_in_file_order(const std::function<void(int unit, int index)>& f) const = 0;

  // Which blocks forward() checkpoints, and how ([Note: activation checkpointing] in
  // tensor/tape.hpp): none unless set.
  void set_checkpointing(const ActivationCheckpointing& c) { checkpointing_ = c; }
  const ActivationCheckpointing& checkpointing() const { return checkpointing_; }

  // Which kernels run the blocks' attention (train.attention): our own unless set otherwise.
  void set_attention_kernel(AttentionKernel k) { attention_kernel_ = k; }
  AttentionKernel attention_kernel() const { return attention_kernel_; }

 protected:
  // The model's math, each step bracketing its units on the tape (tape.begin_unit/end_unit).
  // tokens (B,T) i32 on the host, checked against the vocabulary -> the residual stream (B,T,C).
  virtual Tensor embed(Tape& tape, const Tensor& host_tokens) = 0;
  // Block `layer` (unit block_unit(layer)), without its unit markers: forward() places them.
  virtual Tensor block(Tape& tape, int layer, const Tensor& x) = 0;
  // The residual stream -> the logits as column ranges of equal width, (B,T,Vp/K) each.
  virtual std::vector<Tensor> head(Tape& tape, const Tensor& x) = 0;

 private:
  std::vector<Tensor> logit_parts(Tape& tape, const Tensor& tokens);
  // Block `layer` as its unit, checkpointed where the policy says.
  Tensor run_block(Tape& tape, int layer, const Tensor& x);
  // Unit u's own parameters (u < base_units()) as their ParamSpecs say.
  void init_base_unit(int u, uint64_t seed);
  // Whether unit u has parameters that train, its own or its adapters.
  bool unit_trains(int u) const;

  std::string arch_;
  ModelDims dims_;
  std::vector<UnitLayout> layout_;
  int embedding_units_;
  int base_units_;
  LoraConfig lora_;
  std::vector<std::vector<LoraAdapter>> adapters_;  // per model unit
  uint64_t dropout_stream_ = 0, passes_ = 0;
  std::vector<std::vector<Tensor>> bound_;
  std::vector<std::vector<Tensor>> fused_;
  AttentionKernel attention_kernel_ = AttentionKernel::own;
  ActivationCheckpointing checkpointing_;
};

// The smallest K dividing `rows` for which a K-th of a (rows, cols) table holds at most
// `max_numel` elements: how many row-range units an embedding or an output head is cut into so
// that none is larger than a block ([Note: the tied embedding's units] in models/gpt2.hpp).
int row_range_units(int rows, int64_t cols, int64_t max_numel);
// The rows of each of `units` row ranges of a `rows`-row table; std::invalid_argument naming
// `what` ("gpt2: wte_units") unless units >= 1 divides rows.
int64_t row_range_rows(const std::string& what, int units, int rows);

// Appends a tensor to `u`'s layout at the end of its buffer.
void add_param(UnitLayout& u, ParamSpec p);
// Declares u's last `count` parameters one fused tensor; returns its index among u's fused.
int fuse_last(UnitLayout& u, int count);

// Token ids must lie in [0, padded_vocab_size): std::invalid_argument naming the first that does not.
void check_tokens(const Tensor& host_tokens, int padded_vocab_size);

// Parameters on any device and in any floating dtype, through the host in f32: store_f32 writes
// host f32 values into t (rounded to its dtype), host_f32 returns t's values (t itself when it is
// a host f32 tensor, else a copy).
void store_f32(const Tensor& t, const Tensor& host);
Tensor host_f32(const Tensor& t);

}  // namespace zt
