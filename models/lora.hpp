// LoRA (PEFT's LoraConfig): low-rank adapters beside a model's linear weights, trained while the
// model itself stays frozen. [Note: LoRA units]
//
// [Note: LoRA units] Model::apply_lora freezes every parameter of the model and appends, for each
// unit holding a targeted weight W (OC, C), an adapter unit that runs with it: lora_A (r, C) and
// lora_B (OC, r) for each of its targeted weights, in the unit's order. The adapters are a flat
// buffer of their own, so the ZeRO engine shards, gathers, reduces and updates them like any
// trainable unit while the frozen unit has no gradients and no optimizer state, and the scheduler
// gathers and releases a unit together with its adapters (runtime/zero/unit_group.hpp). A
// projection y = x W^T + b reading W gains scale * (x A^T) B^T in W's columns of y (a fused qkv
// reads three weights, each adapted or not), scale = alpha / r, or alpha / sqrt(r) with
// use_rslora. The names are PEFT's: "<module>.lora_A.weight", the module being W's Hugging Face
// name without ".weight"; a target matches a module named it or ending in ".<target>".
#pragma once

#include <array>
#include <string>
#include <vector>

#include "tensor/tape.hpp"
#include "tensor/tensor.hpp"

namespace zt {

struct UnitLayout;

struct LoraConfig {
  int r = 0;  // the adapters' rank; 0: no LoRA
  double alpha = 8;
  double dropout = 0;
  std::vector<std::string> target_modules;  // empty: the architecture's default, PEFT's
  std::string init = "default";             // PEFT's init_lora_weights: "default" (true) or "gaussian"
  bool use_rslora = false;
  // A PEFT adapter folder the adapters start from (models/peft_format.hpp); empty: init above.
  std::string init_from;
  bool enabled() const { return r > 0; }
  float scale() const;
  // target_modules, or where none are given `arch`'s default (default_lora_targets).
  std::vector<std::string> targets(const std::string& arch) const;
};

// One adapter of a projection's weights: scale * (dropout(x) a^T) b^T goes into columns [col0,
// col0 + b.dim(0)) of the projection's output; the dropout (PEFT's lora_dropout, one mask per
// adapter) draws its mask from `seed` ([Note: dropout masks] in kernels/backend.hpp).
struct LoraTerm {
  Tensor a, b;
  int64_t col0 = 0;
  float scale = 1;
  float dropout = 0;
  uint64_t seed = 0;
};
using LoraTerms = std::vector<LoraTerm>;

// A block's projections' adapters, by the architecture's projection number (Llama's
// LlamaProjection, GPT-2's Gpt2Projection); a block without adapters gets none.
using BlockLora = std::array<LoraTerms, 4>;
const LoraTerms& projection_lora(const BlockLora* lora, int k);

// x (...,C) -> linear(x, weight, bias) plus every term of `lora`.
Tensor adapted_linear(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias, const LoraTerms& lora);

// Where an adapted weight's adapter lives: base parameter `param` of its unit, adapted by
// parameters `a` and `b` of unit `unit`.
struct LoraAdapter {
  int param, unit, a, b;
};

// PEFT's default targets for an architecture (its TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
std::vector<std::string> default_lora_targets(const std::string& arch);
// Whether PEFT's target `target` names the module `module` ("model.layers.0.self_attn.q_proj").
bool lora_target_matches(const std::string& module, const std::string& target);
// A parameter's module: its Hugging Face name without ".weight" ("" for one not named so).
std::string lora_module(const std::string& hf_name);

// [Note: LoRA units] on `layout` (the model's units, none an adapter unit yet): freezes them and
// appends the adapter units; returns, per unit of the original layout, its adapters. `first_tensor`
// numbers the adapters' tensors (their init streams). std::invalid_argument naming the problem: a
// target that matches no module, one that names something other than a linear weight in the
// blocks, a rank larger than a targeted weight's smaller side.
std::vector<std::vector<LoraAdapter>> add_lora_units(std::vector<UnitLayout>& layout, const LoraConfig& c,
                                                     const std::string& arch, int first_tensor);

// PEFT's initialisation of an adapter unit's tensors into `params` (the unit's flat buffer, f32 on
// the host): "default": A Kaiming-uniform (bound 1/sqrt(C), torch's kaiming_uniform_ with a =
// sqrt(5)), B zero; "gaussian": A normal(0, 1/r), B zero.
void init_lora_unit(const UnitLayout& unit, const LoraConfig& c, uint64_t seed, float* params);

}  // namespace zt
