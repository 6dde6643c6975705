#include "models/registry.hpp"

#include <stdexcept>

namespace zt {

// The architectures built in, each defined in its own models/<arch>_spec.cpp.
ModelSpec gpt2_spec();
ModelSpec llama_spec();
ModelSpec qwen3_spec();
ModelSpec gemma3_spec();

namespace {

// "a", "a or b", "a, b or c", each as `quote` writes it.
std::string list_text(const std::vector<std::string>& names, bool quote) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string name = quote ? "\"" + names[i] + "\"" : names[i];
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + name;
  }
  return s;
}

template <class Names>
std::vector<std::string> all_names(Names names) {
  std::vector<std::string> out;
  for (const ModelSpec& s : model_specs())
    for (const std::string& n : names(s)) out.push_back(n);
  return out;
}

}  // namespace

const std::vector<ModelSpec>& model_specs() {
  static const std::vector<ModelSpec> specs = {gpt2_spec(), llama_spec(), qwen3_spec(), gemma3_spec()};
  return specs;
}

const ModelSpec* find_model_spec(const std::string& arch) {
  for (const ModelSpec& s : model_specs())
    if (s.arch == arch) return &s;
  return nullptr;
}

const ModelSpec& model_spec(const std::string& arch) {
  if (const ModelSpec* s = find_model_spec(arch)) return *s;
  throw std::invalid_argument("model arch \"" + arch + "\" is not implemented (expected " + model_archs_text() + ")");
}

std::string model_archs_text() {
  return list_text(all_names([](const ModelSpec& s) { return std::vector<std::string>{s.arch}; }), true);
}

bool is_model_arch(const std::string& arch) { return find_model_spec(arch) != nullptr; }

const ModelSpec* hf_model_spec(const std::string& hf_architecture) {
  for (const ModelSpec& s : model_specs())
    for (const std::string& a : s.hf_architectures)
      if (a == hf_architecture && s.dims_from_hf) return &s;
  return nullptr;
}

const ModelSpec* gguf_model_spec(const std::string& general_architecture) {
  for (const ModelSpec& s : model_specs())
    for (const std::string& a : s.gguf_architectures)
      if (a == general_architecture) return &s;
  return nullptr;
}

std::string hf_architectures_text() {
  return list_text(all_names([](const ModelSpec& s) {
                     return s.dims_from_hf ? s.hf_architectures : std::vector<std::string>{};
                   }),
                   false);
}

std::string gguf_architectures_text() {
  return list_text(all_names([](const ModelSpec& s) { return s.gguf_architectures; }), true);
}

double model_num_params_f64(const std::string& arch, const ModelDims& d) { return model_spec(arch).num_params_f64(d); }

std::unique_ptr<Model> make_model(const std::string& arch, const ModelDims& d, int embedding_units) {
  return model_spec(arch).make(d, embedding_units);
}

}  // namespace zt
