// ModelSpec: one architecture as everything outside its own files sees it, registered once in
// models/registry.cpp. The runtime, the checkpoint meta, the config checks, `ztrain bench`'s peer
// and the file adapters (Hugging Face folders, PEFT, llm.c) ask the spec of a model's `arch`
// rather than branch on its name, so a new architecture is its model files and one spec
// ([Note: a new model] in models/model.hpp). torchtitan's ModelSpec with its state-dict adapter
// is the pattern; the tensor names a format keeps stay in that format's adapter.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/model_dims.hpp"

namespace zt {

class Model;
class HfConfig;

// model.arch where a config names none, and the arch of a checkpoint whose meta predates the key.
inline constexpr const char* kDefaultModelArch = "gpt2";

struct ModelSpec {
  std::string arch;    // model.arch, and the name a checkpoint's meta records
  std::string family;  // for messages: "GPT-2", "the Llama family"

  // Whether the architecture has the ModelDims field `key` (for_each_dim's names): a config key
  // for a field it lacks is refused rather than ignored, and a checkpoint's meta holds only its own.
  std::function<bool(std::string_view key)> has_dim;
  // Relations between the dims beyond their ranges, checked where `known(key)` (a dim given, or
  // not to come from a checkpoint): fail(key, what) names the first broken one.
  std::function<void(const ModelDims& d, const std::function<bool(std::string_view)>& known,
                     const std::function<void(const std::string& key, const std::string& what)>& fail)>
      check_dims;
  // Parameters of a model of these dims, in floating point and without building it.
  std::function<double(const ModelDims&)> num_params_f64;
  // The model; embedding_units 0 lets it choose how many row ranges its embedding is cut into.
  std::function<std::unique_ptr<Model>(const ModelDims&, int embedding_units)> make;
  // LoRA's target modules where lora.target_modules names none (PEFT's defaults for the model).
  std::vector<std::string> lora_targets;

  // llm.c's checkpoint format holds it (GPT-2's).
  bool llmc = false;
  // Hugging Face: the config.json `architectures` read as this model (the first is written), the
  // dims from a config.json (unset: the model is not read from Hugging Face folders) and to one
  // (its model keys; the writer adds torch_dtype).
  std::vector<std::string> hf_architectures;
  std::function<ModelDims(const HfConfig&)> dims_from_hf;
  std::function<nlohmann::json(const ModelDims&)> hf_config;
  // PEFT's adapter files: the causal-LM module's path to the modules the Hugging Face names start
  // from, and whether its linear weights are stored (in, out) (GPT-2's Conv1D).
  std::string peft_module_prefix;
  bool fan_in_fan_out = false;
  // GGUF: the general.architecture values read as this model.
  std::vector<std::string> gguf_architectures;
  // `ztrain bench`'s PyTorch peer (bench/peers_step.py): its model arguments for these dims, empty
  // where it has no such model.
  std::function<std::vector<std::string>(const ModelDims&)> peer_args;
};

}  // namespace zt
