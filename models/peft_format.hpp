// PEFT's LoRA adapter folder, what PeftModel.from_pretrained loads onto its base model:
// adapter_model.safetensors (the adapter units' tensors, [Note: LoRA units] in models/lora.hpp,
// under the names PEFT gives them on a causal-LM model) and adapter_config.json (r, alpha, the
// target modules). This file alone knows those names; the safetensors writer
// (runtime/checkpoint/model_writer.cpp) and the reader below use it.
#pragma once

#include <memory>
#include <string>

#include "models/model.hpp"
#include "files/tensor_file.hpp"

namespace zt {

// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" for an adapter parameter.
std::string peft_tensor_name(const Model& model, const ParamSpec& p);
// adapter_config.json for `model`'s lora() section; `base_model` the starting model's path ("" for none).
std::string peft_config_json(const Model& model, const std::string& base_model);

// A PEFT adapter folder (or its adapter_model.safetensors) read into `model`'s adapter units: the
// starting adapters of a run (lora.init_from). The folder's r, lora_alpha and use_rslora must be
// the model's, and it must hold exactly the model's adapters. std::runtime_error naming the
// folder and the difference otherwise.
class PeftAdapters {
 public:
  PeftAdapters(const std::string& path, const Model& model);
  // Adapter unit u's flat buffer (layout()[u].numel floats).
  void read_unit(int u, float* out) const;

 private:
  const Model& model_;
  std::unique_ptr<TensorFile> file_;
};

}  // namespace zt
