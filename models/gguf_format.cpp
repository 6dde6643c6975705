#include "models/gguf_format.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

#include "models/registry.hpp"

namespace zt {

namespace {

// Hugging Face's name within a block -> llama.cpp's.
const std::map<std::string, std::string>& block_names() {
  static const std::map<std::string, std::string> m = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  return m;
}

std::string gguf_name(const ParamSpec& p) {
  if (p.hf_name == "model.embed_tokens.weight") return "token_embd.weight";
  if (p.hf_name == "model.norm.weight") return "output_norm.weight";
  if (p.hf_name == "lm_head.weight") return "output.weight";
  const std::string pre = "model.layers." + std::to_string(p.layer) + ".";
  if (p.layer >= 0 && p.hf_name.starts_with(pre)) {
    const auto it = block_names().find(p.hf_name.substr(pre.size()));
    if (it != block_names().end()) return "blk." + std::to_string(p.layer) + "." + it->second;
  }
  throw std::logic_error("gguf: no llama.cpp name for " + p.hf_name);
}

}  // namespace

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufModel read_gguf_model(const GgufFile& f) {
  auto fail = [&](const std::string& what) { return std::runtime_error("gguf '" + f.path() + "': " + what); };
  const std::optional<std::string> general = f.meta_string("general.architecture");
  if (!general) throw fail("no general.architecture");
  const ModelSpec* spec = gguf_model_spec(*general);
  if (!spec)
    throw fail("general.architecture \"" + *general + "\" is not a model ztrain trains (" + gguf_architectures_text() + ")");
  const std::string& a = *general;
  auto integer = [&](const std::string& key) -> std::optional<int> {
    const std::optional<int64_t> v = f.meta_int(a + "." + key);
    if (!v) return std::nullopt;
    if (*v < 1 || *v > INT32_MAX) throw fail(a + "." + key + " must be a positive 32-bit integer, got " + std::to_string(*v));
    return static_cast<int>(*v);
  };
  auto required = [&](const std::string& key) {
    const std::optional<int> v = integer(key);
    if (!v) throw fail("no " + a + "." + key);
    return *v;
  };
  ModelDims d;
  d.n_layer = required("block_count");
  d.n_embd = required("embedding_length");
  d.intermediate_size = required("feed_forward_length");
  d.n_head = required("attention.head_count");
  d.n_kv_head = integer("attention.head_count_kv").value_or(d.n_head);
  d.max_seq_len = required("context_length");
  d.head_dim = integer("attention.key_length").value_or(d.n_embd % d.n_head == 0 ? d.n_embd / d.n_head : 0);
  if (d.head_dim == 0) throw fail("no " + a + ".attention.key_length, and embedding_length does not divide by head_count");
  // The vocabulary: the key, else the tokenizer's tokens, else the embedding's rows; where the
  // embedding is there, whichever gave it must agree with its rows (llama.cpp sizes the model
  // from the tensor), so an absurd key is named here rather than as memory it would take.
  std::optional<int> vocab = integer("vocab_size");
  std::string vocab_from = a + ".vocab_size";
  if (!vocab)
    if (const std::optional<std::vector<std::string>> tokens = f.meta_strings("tokenizer.ggml.tokens"))
      if (!tokens->empty() && tokens->size() <= size_t{INT32_MAX})
        vocab = static_cast<int>(tokens->size()), vocab_from = "tokenizer.ggml.tokens' count";
  const TensorFileEntry* embd = f.find("token_embd.weight");
  if (embd && embd->shape.size() == 2) {
    const int64_t rows = embd->shape[0];
    if (rows < 1 || rows > INT32_MAX) throw fail("token_embd.weight has " + std::to_string(rows) + " rows");
    if (!vocab) vocab = static_cast<int>(rows), vocab_from = "token_embd.weight's rows";
    if (*vocab != rows)
      throw fail(vocab_from + " " + std::to_string(*vocab) + " disagrees with token_embd.weight's " + std::to_string(rows) +
                 " rows");
  }
  if (!vocab) throw fail("no " + a + ".vocab_size");
  if (embd && embd->shape.size() == 2 && embd->shape[1] != d.n_embd)
    throw fail(a + ".embedding_length " + std::to_string(d.n_embd) + " disagrees with token_embd.weight's " +
               std::to_string(embd->shape[1]) + " columns");
  // The blocks the tensors hold (blk.<i>.*): the model is sized from block_count, so an absurd one
  // is named here rather than as the memory it would take.
  int64_t blocks = 0;
  for (const TensorFileEntry& e : f.entries()) {
    if (!e.name.starts_with("blk.")) continue;
    const size_t dot = e.name.find('.', 4);
    const std::string index = e.name.substr(4, dot == std::string::npos ? std::string::npos : dot - 4);
    if (!index.empty() && index.size() < 10 && index.find_first_not_of("0123456789") == std::string::npos)
      blocks = std::max<int64_t>(blocks, std::stoll(index) + 1);
  }
  if (blocks != d.n_layer)
    throw fail(a + ".block_count " + std::to_string(d.n_layer) + " disagrees with the tensors, which hold " +
               (blocks ? std::to_string(blocks) + (blocks == 1 ? " block" : " blocks") + " (blk.0 to blk." + std::to_string(blocks - 1) + ")"
                      : "no block"));
  d.vocab_size = *vocab;
  d.padded_vocab_size = padded_vocab(d.vocab_size);
  d.rms_norm_eps = f.meta_float(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  d.rope_theta = f.meta_float(a + ".rope.freq_base").value_or(10000.0);
  if (f.find("rope_freqs.weight"))
    throw fail("rope_freqs.weight (Llama 3.1's RoPE scaling as llama.cpp stores it) is not read; start from the Hugging "
               "Face folder instead");
  if (const std::optional<std::string> s = f.meta_string(a + ".rope.scaling.type"); s && *s != "none")
    throw fail(a + ".rope.scaling.type \"" + *s + "\" is not implemented");
  d.tie_word_embeddings = f.find("output.weight") == nullptr;
  d.attention_bias = a == "qwen2";  // llama.cpp's name for the Llama family with q/k/v biases
  d = derive_dims(d);
  if (d.n_head % d.n_kv_head) throw fail(a + ".attention.head_count_kv does not divide head_count");
  // llama.cpp's converter permutes LLaMA's q and k rows alone (gguf_tensor_map).
  return {spec->arch, d, a == "llama"};
}

FileTensorMap gguf_tensor_map(const GgufModel& m) {
  FileTensorMap map{gguf_name, {}};
  if (!m.permuted_qk) return map;
  const int64_t hd = m.dims.head_dim;
  map.row = [hd](const ParamSpec& p, int64_t r) -> int64_t {
    if (!p.hf_name.ends_with("q_proj.weight") && !p.hf_name.ends_with("k_proj.weight")) return r;
    // Hugging Face's row h*hd + j*hd/2 + i (half j, pair i) is llama.cpp's h*hd + 2i + j.
    const int64_t h = r / hd, w = r % hd, j = w / (hd / 2), i = w % (hd / 2);
    return h * hd + 2 * i + j;
  };
  return map;
}

void check_gguf_tensors(const GgufFile& f, const GgufModel& gm, const Model& model) {
  check_file_tensors(f, model, gguf_tensor_map(gm), "gguf '" + f.path() + "'",
                     [](const std::string& name) { return name == "rope_freqs.weight"; });
}

}  // namespace zt
