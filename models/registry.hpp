// The one place that knows the concrete models: each architecture's ModelSpec
// (models/model_spec.hpp), by its `model.arch` name or by the names its files give it.
// [Note: a new model] in models/model.hpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.hpp"
#include "models/model_spec.hpp"

namespace zt {

// Every architecture built in, in a fixed order.
const std::vector<ModelSpec>& model_specs();
// The architecture named `arch`; std::invalid_argument naming it and those there are otherwise.
const ModelSpec& model_spec(const std::string& arch);
// nullptr for an arch that is not built in.
const ModelSpec* find_model_spec(const std::string& arch);
// The architectures' names for a message: "\"gpt2\" or \"llama\"".
std::string model_archs_text();
bool is_model_arch(const std::string& arch);
// The spec that reads a Hugging Face config.json's `architectures` name, or a GGUF file's
// general.architecture; nullptr for none.
const ModelSpec* hf_model_spec(const std::string& hf_architecture);
const ModelSpec* gguf_model_spec(const std::string& general_architecture);
// What the Hugging Face and GGUF readers take, for their messages ("LlamaForCausalLM, ...").
std::string hf_architectures_text();
std::string gguf_architectures_text();

// Parameters of a model of these dimensions, in floating point and without building it: a
// header's or a config's dimensions may describe more than int64 or memory can hold, and are
// refused by this count first.
double model_num_params_f64(const std::string& arch, const ModelDims& d);

// embedding_units: how many row ranges the token embedding is cut into (GPT-2's wte_units); 0
// lets the model choose.
std::unique_ptr<Model> make_model(const std::string& arch, const ModelDims& d, int embedding_units = 0);

}  // namespace zt
