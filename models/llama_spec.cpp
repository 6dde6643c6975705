// The Llama family as the runtime and the file adapters see it ([Note: a new model] in
// models/model.hpp): Llama itself (with Qwen2's biases and Mistral's window as its dims say) and
// Qwen3, which is Llama's block with q/k norms.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "files/json_text.hpp"
#include "models/hf_config.hpp"
#include "models/llama.hpp"
#include "models/model_spec.hpp"

namespace zt {

namespace {

using nlohmann::json;

void check_llama_dims(const ModelDims& d, const std::function<bool(std::string_view)>& known,
                      const std::function<void(const std::string&, const std::string&)>& fail) {
  if (known("head_dim") && d.head_dim % 2 != 0)
    fail("head_dim", "must be even (RoPE rotates pairs), got " + std::to_string(d.head_dim));
}

}  // namespace

ModelDims llama_family_widths_from_hf(const HfConfig& r) {
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
  d.tie_word_embeddings = r.flag("tie_word_embeddings", false);
  d.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  // transformers' embedding leaves pad_token_id's row out of the lookups' gradient (padding_idx).
  if (const json* p = r.find("pad_token_id")) {
    if (!p->is_number_integer() || p->get<int64_t>() < 0 || p->get<int64_t>() >= d.vocab_size)
      r.fail("pad_token_id", "expected a token id below vocab_size or null, got " + show_json(*p));
    d.pad_token_id = p->get<int>();
  }
  return d;
}

void check_llama_family_heads(const HfConfig& r, const ModelDims& d) {
  if (d.n_head % d.n_kv_head) r.fail("num_key_value_heads", std::to_string(d.n_kv_head) + " does not divide num_attention_heads");
  if (d.head_dim % 2) r.fail("head_dim", "must be even, got " + std::to_string(d.head_dim));
}

ModelDims llama_family_dims_from_hf(const HfConfig& r) {
  const std::string& arch = r.architecture();
  if (const json* act = r.find("hidden_act"); act && *act != "silu")
    r.fail("hidden_act", show_json(*act) + ": the Llama family's MLP is SwiGLU (\"silu\")");
  if (r.flag("mlp_bias", false)) r.fail("mlp_bias", "true: MLP biases are not modelled");
  const bool qwen2 = arch == "Qwen2ForCausalLM", qwen3 = arch == "Qwen3ForCausalLM";
  // Qwen2's q/k/v projections always carry biases; a Llama's or Qwen3's attention_bias would add
  // o_proj's too.
  if (!qwen2 && r.flag("attention_bias", false))
    r.fail("attention_bias", "true on " + arch + " (biases on q, k, v and o_proj) is not modelled; Qwen2's q/k/v biases are");

  ModelDims d = llama_family_widths_from_hf(r);
  // Within a sliding window attention is full attention: the longest sequence it trains is the
  // window (Mistral v0.1's 4096); Qwen2 and Qwen3 say whether they use one.
  if (const json* w = r.find("sliding_window"); w && (!(qwen2 || qwen3) || r.flag("use_sliding_window", false))) {
    if (!w->is_number_integer() || w->get<int64_t>() < 1) r.fail("sliding_window", "expected a positive integer, got " + show_json(*w));
    d.max_seq_len = static_cast<int>(std::min<int64_t>(d.max_seq_len, w->get<int64_t>()));
  }
  d.attention_bias = qwen2;
  // transformers 5 moved rope_theta and the scaling into rope_parameters.
  const json* params = r.find("rope_parameters");
  d.rope_theta = r.number("rope_theta", params ? r.number(*params, "rope_theta", 10000.0) : 10000.0);
  const json* scaling = r.find("rope_scaling");
  if (!scaling) scaling = params;
  if (scaling) {
    const char* key = scaling == params ? "rope_parameters" : "rope_scaling";
    if (!scaling->is_object()) r.fail(key, "expected an object, got " + show_json(*scaling));
    const json* type = HfConfig::find(*scaling, "rope_type");
    if (!type) type = HfConfig::find(*scaling, "type");
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
  check_llama_family_heads(r, d);
  return d;
}

json llama_family_hf_widths(const ModelDims& d, const std::string& architecture, const std::string& model_type) {
  return {{"architectures", {architecture}},
          {"model_type", model_type},
          {"vocab_size", d.vocab_size},
          {"hidden_size", d.n_embd},
          {"intermediate_size", d.intermediate_size},
          {"num_hidden_layers", d.n_layer},
          {"num_attention_heads", d.n_head},
          {"num_key_value_heads", d.n_kv_head},
          {"head_dim", d.head_dim},
          {"max_position_embeddings", d.max_seq_len},
          {"rms_norm_eps", d.rms_norm_eps},
          {"tie_word_embeddings", d.tie_word_embeddings},
          {"pad_token_id", d.pad_token_id >= 0 ? json(d.pad_token_id) : json(nullptr)}};
}

json llama_family_hf_config(const ModelDims& d, const std::string& architecture, const std::string& model_type) {
  json j = llama_family_hf_widths(d, architecture, model_type);
  j["rope_theta"] = d.rope_theta;
  j["hidden_act"] = "silu";
  if (!d.attention_bias) j["attention_bias"] = false, j["mlp_bias"] = false;
  const RopeScaling& s = d.rope_scaling;
  j["rope_scaling"] = s.rope_type == "llama3"
                          ? json{{"rope_type", "llama3"}, {"factor", s.factor}, {"low_freq_factor", s.low_freq_factor},
                                 {"high_freq_factor", s.high_freq_factor},
                                 {"original_max_position_embeddings", s.original_max_position_embeddings}}
                          : json(nullptr);
  return j;
}

std::vector<std::string> llama_family_peer_args(const ModelDims& d, const std::string& peer_arch) {
  return {"--arch",      peer_arch,           "--padded-vocab", std::to_string(d.vocab_size),
          "--kv-heads",  std::to_string(d.n_kv_head), "--intermediate", std::to_string(d.intermediate_size),
          "--head-dim",  std::to_string(d.head_dim),  "--rope-theta",   std::to_string(d.rope_theta),
          "--tie",       d.tie_word_embeddings ? "1" : "0"};
}

ModelSpec llama_family_spec(const LlamaVariant& v) {
  ModelSpec s;
  s.arch = v.arch;
  s.has_dim = [](std::string_view key) { return !local_attention_dim(key); };
  s.check_dims = check_llama_dims;
  s.num_params_f64 = [v](const ModelDims& d) { return llama_num_params_f64(d, v); };
  s.make = [v](const ModelDims& d, int units) -> std::unique_ptr<Model> { return std::make_unique<Llama>(d, units, v); };
  s.lora_targets = {"q_proj", "v_proj"};  // PEFT's default for the Llama family
  s.dims_from_hf = llama_family_dims_from_hf;
  return s;
}

ModelSpec llama_spec() {
  ModelSpec s = llama_family_spec({});
  s.family = "the Llama family";
  s.hf_architectures = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"};
  // Qwen2 is a Llama with q/k/v biases: written as the class transformers has for that.
  s.hf_config = [](const ModelDims& d) {
    return d.attention_bias ? llama_family_hf_config(d, "Qwen2ForCausalLM", "qwen2")
                            : llama_family_hf_config(d, "LlamaForCausalLM", "llama");
  };
  s.gguf_architectures = {"llama", "qwen2"};
  s.peer_args = [](const ModelDims& d) { return llama_family_peer_args(d, "llama"); };
  return s;
}

}  // namespace zt
