// Gemma 3's text models (Gemma3ForCausalLM) as the runtime and the file adapters see them
// ([Note: a new model] in models/model.hpp): the Llama family's block with Gemma's features
// (LlamaVariant: q/k norms, (1 + w) norms around attention and the MLP, GeGLU, scaled
// embeddings) and its local attention: every layer but each sliding_window_pattern-th attends
// within a causal window of sliding_window tokens with RoPE base rope_local_base_freq, the others
// globally with rope_theta; attention scales by query_pre_attn_scalar^-1/2.
#include <nlohmann/json.hpp>

#include "files/json_text.hpp"
#include "models/hf_config.hpp"
#include "models/llama.hpp"
#include "models/model_spec.hpp"

namespace zt {

namespace {

using nlohmann::json;

// config.json's per-layer kinds as a pattern: "sliding_attention" on every layer but each p-th.
int pattern_of(const HfConfig& r, int n_layer) {
  const json* types = r.find("layer_types");
  if (!types) return r.integer("sliding_window_pattern", 6);  // the hub's older key, transformers' default
  if (!types->is_array() || types->size() != size_t(n_layer))
    r.fail("layer_types", "expected a list of num_hidden_layers kinds, got " + show_json(*types));
  for (int p = 1; p <= n_layer + 1; ++p) {
    bool fits = true;
    for (int l = 0; l < n_layer && fits; ++l)
      fits = (*types)[size_t(l)] == ((l + 1) % p != 0 ? "sliding_attention" : "full_attention");
    if (fits) return p;
  }
  r.fail("layer_types", show_json(*types) + ": only every p-th layer global, the others sliding, is modelled");
}

ModelDims gemma3_dims_from_hf(const HfConfig& r) {
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (r.find(key)) r.fail(key, "soft-capping is not modelled (Gemma 3 has none)");
  if (r.flag("use_bidirectional_attention", false)) r.fail("use_bidirectional_attention", "true is not modelled");
  if (r.flag("attention_bias", false)) r.fail("attention_bias", "true is not modelled");
  if (const json* act = r.find("hidden_activation"); act && *act != "gelu_pytorch_tanh")
    r.fail("hidden_activation", show_json(*act) + ": Gemma's MLP is GeGLU with tanh-GELU (\"gelu_pytorch_tanh\")");
  ModelDims d = llama_family_widths_from_hf(r);
  d.tie_word_embeddings = r.flag("tie_word_embeddings", true);
  if (!r.root().contains("pad_token_id")) d.pad_token_id = 0;  // Gemma3TextConfig's default
  d.sliding_window = r.find("sliding_window") ? r.integer("sliding_window") : 0;
  d.sliding_window_pattern = pattern_of(r, d.n_layer);
  d.query_pre_attn_scalar = r.number("query_pre_attn_scalar", 256.0);
  if (!(d.query_pre_attn_scalar > 0)) r.fail("query_pre_attn_scalar", "must be positive");
  // transformers 5's rope_parameters by layer kind, or the hub's older rope_theta and
  // rope_local_base_freq; a scaling other than none is refused.
  d.rope_theta = r.number("rope_theta", 1000000.0);
  d.rope_local_base_freq = r.number("rope_local_base_freq", 10000.0);
  if (const json* s = r.find("rope_scaling"); s && !(s->is_object() && s->value("rope_type", "default") == "default"))
    r.fail("rope_scaling", show_json(*s) + " is not implemented");
  if (const json* p = r.find("rope_parameters")) {
    if (!p->is_object()) r.fail("rope_parameters", "expected an object, got " + show_json(*p));
    for (const auto& [kind, theta] : {std::pair{"full_attention", &d.rope_theta}, std::pair{"sliding_attention", &d.rope_local_base_freq}}) {
      const json* k = HfConfig::find(*p, kind);
      if (!k) continue;
      if (!k->is_object() || k->value("rope_type", "default") != "default")
        r.fail("rope_parameters", std::string(kind) + ": " + show_json(*k) + " is not implemented (rope_type \"default\")");
      *theta = r.number(*k, "rope_theta", *theta);
    }
  }
  d = derive_dims(d);
  check_llama_family_heads(r, d);
  return d;
}

json gemma3_hf_config(const ModelDims& d) {
  json j = llama_family_hf_widths(d, "Gemma3ForCausalLM", "gemma3_text");
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["query_pre_attn_scalar"] = d.query_pre_attn_scalar;
  j["sliding_window"] = d.sliding_window ? json(d.sliding_window) : json(nullptr);
  json types = json::array();
  for (int l = 0; l < d.n_layer; ++l) types.push_back(d.sliding_layer(l) ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", d.rope_theta}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", d.rope_local_base_freq}}}};
  j["attention_bias"] = false;
  j["final_logit_softcapping"] = nullptr;
  j["attn_logit_softcapping"] = nullptr;
  return j;
}

}  // namespace

ModelSpec gemma3_spec() {
  ModelSpec s = llama_family_spec({.arch = "gemma3",
                                   .qk_norm = true,
                                   .norm_offset = 1.0f,
                                   .sandwich_norms = true,
                                   .geglu = true,
                                   .scaled_embedding = true});
  s.family = "Gemma 3";
  // No biases and no RoPE scaling; its own local attention's four.
  s.has_dim = [](std::string_view key) { return key != "attention_bias" && !key.starts_with("rope_scaling."); };
  s.hf_architectures = {"Gemma3ForCausalLM"};
  s.dims_from_hf = gemma3_dims_from_hf;
  s.hf_config = gemma3_hf_config;
  return s;
}

}  // namespace zt
