#include "models/hf_format.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "models/foreign_formats.hpp"
#include "files/json_text.hpp"
#include "files/safetensors_file.hpp"

namespace zt {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kArchitectures[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"};

struct ConfigReader {
  std::string path;
  const json& j;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw std::runtime_error("'" + path + "': " + key + ": " + what);
  }
  const json* find(const json& in, const char* key) const {
    const auto it = in.find(key);
    return it == in.end() || it->is_null() ? nullptr : &*it;
  }
  int integer(const char* key, std::optional<int> fallback = std::nullopt) const {
    const json* v = find(j, key);
    if (!v) {
      if (fallback) return *fallback;
      fail(key, "missing");
    }
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > INT32_MAX)
      fail(key, "expected a positive integer, got " + show_json(*v));
    return v->get<int>();
  }
  double number(const json& in, const char* key, double fallback) const {
    const json* v = find(in, key);
    if (!v) return fallback;
    if (!v->is_number()) fail(key, "expected a number, got " + show_json(*v));
    return v->get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    const json* v = find(j, key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(key, "expected true or false, got " + show_json(*v));
    return v->get<bool>();
  }
};

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("'" + path + "': cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  JsonParsed<json> p = parse_json(text.str());  // [Note: JSON from files] in files/json_text.hpp
  if (!p.ok()) throw std::runtime_error("'" + path + "': not valid JSON: " + p.error);
  return std::move(p.value);
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

HfModel read_hf_config(const std::string& folder) {
  const std::string path = (fs::path(folder) / "config.json").string();
  const json j = read_json(path);
  if (!j.is_object()) throw std::runtime_error("'" + path + "': expected a JSON object");
  const ConfigReader r{path, j};
  const json* archs = r.find(j, "architectures");
  std::string arch = archs && archs->is_array() && archs->size() == 1 && (*archs)[0].is_string() ? (*archs)[0].get<std::string>() : "";
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), arch) == std::end(kArchitectures))
    r.fail("architectures", (archs ? show_json(*archs) : std::string("missing")) +
                                " is not a model ztrain trains from Hugging Face files (LlamaForCausalLM, "
                                "Qwen2ForCausalLM, MistralForCausalLM)");
  if (const json* act = r.find(j, "hidden_act"); act && *act != "silu")
    r.fail("hidden_act", show_json(*act) + ": the Llama family's MLP is SwiGLU (\"silu\")");
  if (r.flag("mlp_bias", false)) r.fail("mlp_bias", "true: MLP biases are not modelled");
  const bool qwen2 = arch == "Qwen2ForCausalLM";
  // Qwen2's q/k/v projections always carry biases; a Llama's attention_bias would add o_proj's too.
  if (!qwen2 && r.flag("attention_bias", false))
    r.fail("attention_bias", "true on " + arch + " (biases on q, k, v and o_proj) is not modelled; Qwen2's q/k/v biases are");

  ModelDims d;
  d.n_embd = r.integer("hidden_size");
  d.n_layer = r.integer("num_hidden_layers");
  d.n_head = r.integer("num_attention_heads");
  d.n_kv_head = r.integer("num_key_value_heads", d.n_head);
  d.head_dim = r.integer("head_dim", d.n_embd % d.n_head == 0 ? std::optional<int>(d.n_embd / d.n_head) : std::nullopt);
  d.intermediate_size = r.integer("intermediate_size");
  d.vocab_size = r.integer("vocab_size");
  d.padded_vocab_size = padded_vocab(d.vocab_size);
  d.max_seq_len = r.integer("max_position_embeddings");
  // Within a sliding window attention is full attention: the longest sequence it trains is the
  // window (Mistral v0.1's 4096); Qwen2 says whether it uses one.
  if (const json* w = r.find(j, "sliding_window"); w && (!qwen2 || r.flag("use_sliding_window", false))) {
    if (!w->is_number_integer() || w->get<int64_t>() < 1) r.fail("sliding_window", "expected a positive integer, got " + show_json(*w));
    d.max_seq_len = static_cast<int>(std::min<int64_t>(d.max_seq_len, w->get<int64_t>()));
  }
  d.tie_word_embeddings = r.flag("tie_word_embeddings", false);
  d.attention_bias = qwen2;
  d.rms_norm_eps = r.number(j, "rms_norm_eps", 1e-6);
  // transformers 5 moved rope_theta and the scaling into rope_parameters.
  const json* params = r.find(j, "rope_parameters");
  d.rope_theta = r.number(j, "rope_theta", params ? r.number(*params, "rope_theta", 10000.0) : 10000.0);
  const json* scaling = r.find(j, "rope_scaling");
  if (!scaling) scaling = params;
  if (scaling) {
    const char* key = scaling == params ? "rope_parameters" : "rope_scaling";
    if (!scaling->is_object()) r.fail(key, "expected an object, got " + show_json(*scaling));
    const json* type = r.find(*scaling, "rope_type");
    if (!type) type = r.find(*scaling, "type");
    const std::string t = type && type->is_string() ? type->get<std::string>() : "default";
    if (t == "llama3") {
      RopeScaling& s = d.rope_scaling;
      s.rope_type = t;
      s.factor = r.number(*scaling, "factor", s.factor);
      s.low_freq_factor = r.number(*scaling, "low_freq_factor", s.low_freq_factor);
      s.high_freq_factor = r.number(*scaling, "high_freq_factor", s.high_freq_factor);
      s.original_max_position_embeddings =
          static_cast<int>(r.number(*scaling, "original_max_position_embeddings", s.original_max_position_embeddings));
    } else if (t != "default") {
      r.fail(key, "rope_type \"" + t + "\" is not implemented (\"default\" or \"llama3\")");
    }
  }
  d = derive_dims(d);
  if (d.n_head % d.n_kv_head) r.fail("num_key_value_heads", std::to_string(d.n_kv_head) + " does not divide num_attention_heads");
  if (d.head_dim % 2) r.fail("head_dim", "must be even, got " + std::to_string(d.head_dim));

  HfModel m{"llama", d, ""};
  const fs::path single = fs::path(folder) / "model.safetensors", index = fs::path(folder) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) m.weights = index.string();
  else if (fs::exists(single, ec)) m.weights = single.string();
  else throw std::runtime_error("'" + folder + "': holds config.json but neither model.safetensors nor model.safetensors.index.json");
  return m;
}

std::unique_ptr<TensorFile> open_hf_weights(const HfModel& m) { return open_safetensors(m.weights); }

FileTensorMap hf_tensor_map() {
  return {[](const ParamSpec& p) { return p.hf_name; }, {}};
}

void check_hf_tensors(const TensorFile& f, const Model& model, const std::string& folder) {
  const bool tied = model.dims().tie_word_embeddings;
  check_file_tensors(f, model, hf_tensor_map(), "'" + folder + "'", [&](const std::string& name) {
    return (tied && name == "lm_head.weight") || name.ends_with("rotary_emb.inv_freq");
  });
}

std::string hf_config_json(const Model& model, const std::string& torch_dtype) {
  const ModelDims& d = model.dims();
  json j;
  if (model.arch() == "gpt2") {
    j = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", d.vocab_size},
         {"n_positions", d.max_seq_len}, {"n_ctx", d.max_seq_len}, {"n_embd", d.n_embd}, {"n_layer", d.n_layer},
         {"n_head", d.n_head}, {"activation_function", "gelu_new"}, {"layer_norm_epsilon", 1e-5},
         {"tie_word_embeddings", true}, {"torch_dtype", torch_dtype}};
  } else {
    const bool qwen2 = d.attention_bias;
    j = {{"architectures", {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
         {"model_type", qwen2 ? "qwen2" : "llama"},
         {"vocab_size", d.vocab_size},
         {"hidden_size", d.n_embd},
         {"intermediate_size", d.intermediate_size},
         {"num_hidden_layers", d.n_layer},
         {"num_attention_heads", d.n_head},
         {"num_key_value_heads", d.n_kv_head},
         {"head_dim", d.head_dim},
         {"max_position_embeddings", d.max_seq_len},
         {"rms_norm_eps", d.rms_norm_eps},
         {"rope_theta", d.rope_theta},
         {"hidden_act", "silu"},
         {"tie_word_embeddings", d.tie_word_embeddings},
         {"torch_dtype", torch_dtype}};
    if (!qwen2) j["attention_bias"] = false, j["mlp_bias"] = false;
    const RopeScaling& s = d.rope_scaling;
    j["rope_scaling"] = s.rope_type == "llama3"
                            ? json{{"rope_type", "llama3"}, {"factor", s.factor}, {"low_freq_factor", s.low_freq_factor},
                                   {"high_freq_factor", s.high_freq_factor},
                                   {"original_max_position_embeddings", s.original_max_position_embeddings}}
                            : json(nullptr);
  }
  return j.dump(2) + "\n";
}

}  // namespace zt
