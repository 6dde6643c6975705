// A model's dimensions: what the config's `model` section, a checkpoint's meta and a foreign
// checkpoint's header (an llm.c header, a Hugging Face config.json, GGUF metadata) give. GPT-2 uses
// the first six; the Llama family all of them. for_each_dim names every field by its config and
// checkpoint name, so code that reads, writes, compares or agrees on them treats them alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace zt {

// Llama 3.1's frequency-dependent RoPE scaling (Hugging Face's rope_type "llama3"); "default" is
// plain RoPE and the other fields are then unused.
struct RopeScaling {
  std::string rope_type = "default";
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
  bool operator==(const RopeScaling&) const = default;
};

struct ModelDims {
  int max_seq_len = 1024;
  int vocab_size = 50257;
  int padded_vocab_size = 50304;
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  // The Llama family's. 0 for the three widths means "derived" until derive_dims fills them in
  // (n_head, n_embd / n_head, 4 n_embd: GPT-2's own values, which GPT-2's dims then carry).
  int n_kv_head = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  bool tie_word_embeddings = true;
  bool attention_bias = false;  // q, k and v projections with biases (Qwen2)
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  // Gemma 3's: every layer but each sliding_window_pattern-th (its global ones) attends within a
  // causal window of sliding_window tokens and rotates by RoPE base rope_local_base_freq (0 for
  // either: every layer global); attention scales by query_pre_attn_scalar^-1/2 (0: head_dim's).
  int sliding_window = 0;
  int sliding_window_pattern = 0;
  double rope_local_base_freq = 10000.0;
  double query_pre_attn_scalar = 0.0;
  // The token whose embedding row no lookup trains (torch's padding_idx, Hugging Face's
  // pad_token_id; the tied head still does); -1: none.
  int pad_token_id = -1;
  bool operator==(const ModelDims&) const = default;
  // Whether layer l attends within the sliding window.
  bool sliding_layer(int l) const {
    return sliding_window > 0 && sliding_window_pattern > 0 && (l + 1) % sliding_window_pattern != 0;
  }
};

// Fills the derived widths (0) from the others; the dims every model and checkpoint hold.
inline ModelDims derive_dims(ModelDims d) {
  if (d.n_kv_head == 0) d.n_kv_head = d.n_head;
  if (d.head_dim == 0 && d.n_head > 0) d.head_dim = d.n_embd / d.n_head;
  if (d.intermediate_size == 0) d.intermediate_size = 4 * d.n_embd;
  return d;
}

// llm.c's padding of a vocabulary to a multiple of 128 for its kernels (GPT-2's 50257 to 50304),
// computed in 64 bits and held within an int (an absurd vocabulary fails elsewhere, named).
inline int padded_vocab(int vocab_size) {
  return static_cast<int>(std::min<int64_t>((int64_t{vocab_size} + 127) / 128 * 128, INT32_MAX));
}

// GPT-2's six, in llm.c's header order; the rest at their defaults (derived).
inline ModelDims gpt2_dims(int max_seq_len, int vocab_size, int padded_vocab_size, int n_layer, int n_head, int n_embd) {
  ModelDims d;
  d.max_seq_len = max_seq_len, d.vocab_size = vocab_size, d.padded_vocab_size = padded_vocab_size;
  d.n_layer = n_layer, d.n_head = n_head, d.n_embd = n_embd;
  return derive_dims(d);
}

// Calls f(name, the field of each of d...) for every field, in a fixed order: one ModelDims to
// read or write it, two to compare them. The rope scaling's fields are named "rope_scaling.<key>"
// (a nested object in a config). The first kGpt2DimCount are GPT-2's.
template <class F, class... D>
void for_each_dim(F&& f, D&... d) {
  f("n_layer", d.n_layer...);
  f("n_head", d.n_head...);
  f("n_embd", d.n_embd...);
  f("vocab_size", d.vocab_size...);
  f("padded_vocab_size", d.padded_vocab_size...);
  f("max_seq_len", d.max_seq_len...);
  f("n_kv_head", d.n_kv_head...);
  f("head_dim", d.head_dim...);
  f("intermediate_size", d.intermediate_size...);
  f("tie_word_embeddings", d.tie_word_embeddings...);
  f("attention_bias", d.attention_bias...);
  f("rms_norm_eps", d.rms_norm_eps...);
  f("rope_theta", d.rope_theta...);
  f("rope_scaling.rope_type", d.rope_scaling.rope_type...);
  f("rope_scaling.factor", d.rope_scaling.factor...);
  f("rope_scaling.low_freq_factor", d.rope_scaling.low_freq_factor...);
  f("rope_scaling.high_freq_factor", d.rope_scaling.high_freq_factor...);
  f("rope_scaling.original_max_position_embeddings", d.rope_scaling.original_max_position_embeddings...);
  f("sliding_window", d.sliding_window...);
  f("sliding_window_pattern", d.sliding_window_pattern...);
  f("rope_local_base_freq", d.rope_local_base_freq...);
  f("query_pre_attn_scalar", d.query_pre_attn_scalar...);
  f("pad_token_id", d.pad_token_id...);
}
inline constexpr int kGpt2DimCount = 6;
// Gemma 3's four: local attention's window, pattern and RoPE base, and the attention scale.
inline bool local_attention_dim(std::string_view key) {
  return key == "sliding_window" || key == "sliding_window_pattern" || key == "rope_local_base_freq" ||
         key == "query_pre_attn_scalar";
}

// A field's value as text ("8", "1e-05", "true", "llama3").
inline std::string dim_text(int v) { return std::to_string(v); }
inline std::string dim_text(bool v) { return v ? "true" : "false"; }
std::string dim_text(double v);
inline std::string dim_text(const std::string& v) { return v; }

std::string dims_str(const ModelDims& d);  // "n_layer 12, n_head 12, ..." (GPT-2's six, then what differs)

}  // namespace zt
