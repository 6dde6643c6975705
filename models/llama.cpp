#include "models/llama.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "kernels/ops.hpp"
#include "models/init.hpp"
#include "tensor/dtype.hpp"

namespace zt {

namespace {

// A block's parameter indices, [Note: Llama's units]; the biases only with attention_bias, the
// q/k norms only with the variant's qk_norm, the MLP's two norms only with its sandwich_norms.
struct BlockIndex {
  int input_norm = 0, q = 1, k = 2, v = 3, qb = -1, q_norm = -1, k_norm = -1, o, post_norm, pre_ff = -1, gate, up,
      down, post_ff = -1;
  BlockIndex(bool bias, const LlamaVariant& var) {
    int i = 4;
    if (bias) qb = i, i += 3;
    if (var.qk_norm) q_norm = i++, k_norm = i++;
    o = i++, post_norm = i++;
    if (var.sandwich_norms) pre_ff = i++;
    gate = i++, up = i++, down = i++;
    if (var.sandwich_norms) post_ff = i++;
  }
};
// The fused views' indices within a block unit.
enum BlockFused { kQkv, kGateUp, kQkvBias };

// Hugging Face's initialisation: normal(0, 0.02) for the embedding, the head and every
// projection; a norm's weight 1 (`value`), a bias 0.
void add(UnitLayout& u, std::string name, int layer, Shape shape, bool decay, int tensor, std::string hf_name,
         int64_t hf_rows, int64_t row0 = 0, float value = 0.0f) {
  const float std = shape.size() == 2 ? 0.02f : 0.0f;
  add_param(u, {std::move(name), layer, std::move(shape), 0, decay, tensor, row0, true, std::move(hf_name), hf_rows, false,
                std, value});
}

void check_dims(const ModelDims& d) {
  if (d.n_kv_head < 1 || d.n_head % d.n_kv_head)
    throw std::invalid_argument("llama: n_kv_head " + std::to_string(d.n_kv_head) + " must divide n_head " +
                                std::to_string(d.n_head));
  if (d.head_dim < 2 || d.head_dim % 2)
    throw std::invalid_argument("llama: head_dim must be even (RoPE rotates pairs), got " + std::to_string(d.head_dim));
}

int64_t block_numel(const ModelDims& d, const LlamaVariant& v) {
  const int64_t C = d.n_embd, hd = d.head_dim, F = d.intermediate_size, qkv = (d.n_head + 2 * int64_t{d.n_kv_head}) * hd;
  return (v.sandwich_norms ? 4 : 2) * C + qkv * C + (d.attention_bias ? qkv : 0) + (v.qk_norm ? 2 * hd : 0) +
         C * d.n_head * hd + 3 * F * C;
}

}  // namespace

int llama_embedding_units(const ModelDims& dims, const LlamaVariant& v) {
  const ModelDims d = derive_dims(dims);
  return row_range_units(d.padded_vocab_size, d.n_embd, block_numel(d, v));
}

std::vector<UnitLayout> llama_layout(const ModelDims& dims, const LlamaVariant& v, int embedding_units) {
  const ModelDims d = derive_dims(dims);
  check_dims(d);
  const int64_t C = d.n_embd, hd = d.head_dim, F = d.intermediate_size;
  const int K = embedding_units ? embedding_units : llama_embedding_units(d, v);
  const int64_t R = row_range_rows("llama: embedding units", K, d.padded_vocab_size);
  std::vector<UnitLayout> units;
  for (int k = 0; k < K; ++k) {
    UnitLayout e{k ? "embedding" + std::to_string(k) : "embedding", {}, 0, {}};
    add(e, "embed_tokens", -1, {R, C}, true, 0, "model.embed_tokens.weight", d.vocab_size, k * R);
    units.push_back(std::move(e));
  }
  int tensor = 1;
  const BlockIndex bi(d.attention_bias, v);
  for (int l = 0; l < d.n_layer; ++l) {
    UnitLayout b{"block" + std::to_string(l), {}, 0, {}};
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    auto param = [&](const char* name, const char* hf, Shape shape, bool decay) {
      add(b, name, l, shape, decay, tensor++, pre + hf, shape[0]);
    };
    auto norm = [&](const char* name, const char* hf, int64_t width) {  // (offset + w) starts at 1
      add(b, name, l, {width}, false, tensor++, pre + hf, width, 0, 1.0f - v.norm_offset);
    };
    norm("input_layernorm", "input_layernorm.weight", C);
    param("q_proj", "self_attn.q_proj.weight", {d.n_head * hd, C}, true);
    param("k_proj", "self_attn.k_proj.weight", {d.n_kv_head * hd, C}, true);
    param("v_proj", "self_attn.v_proj.weight", {d.n_kv_head * hd, C}, true);
    fuse_last(b, 3);  // kQkv
    if (d.attention_bias) {
      param("q_proj.bias", "self_attn.q_proj.bias", {d.n_head * hd}, false);
      param("k_proj.bias", "self_attn.k_proj.bias", {d.n_kv_head * hd}, false);
      param("v_proj.bias", "self_attn.v_proj.bias", {d.n_kv_head * hd}, false);
    }
    if (v.qk_norm) {
      norm("q_norm", "self_attn.q_norm.weight", hd);
      norm("k_norm", "self_attn.k_norm.weight", hd);
    }
    param("o_proj", "self_attn.o_proj.weight", {C, d.n_head * hd}, true);
    norm("post_attention_layernorm", "post_attention_layernorm.weight", C);
    if (v.sandwich_norms) norm("pre_feedforward_layernorm", "pre_feedforward_layernorm.weight", C);
    param("gate_proj", "mlp.gate_proj.weight", {F, C}, true);
    param("up_proj", "mlp.up_proj.weight", {F, C}, true);
    fuse_last(b, 2);  // kGateUp
    if (d.attention_bias) b.fused.push_back({bi.qb, 3});  // kQkvBias
    param("down_proj", "mlp.down_proj.weight", {C, F}, true);
    if (v.sandwich_norms) norm("post_feedforward_layernorm", "post_feedforward_layernorm.weight", C);
    units.push_back(std::move(b));
  }
  UnitLayout fin{"final", {}, 0, {}};
  add(fin, "norm", -1, {C}, false, tensor++, "model.norm.weight", C, 0, 1.0f - v.norm_offset);
  units.push_back(std::move(fin));
  if (!d.tie_word_embeddings) {
    for (int k = 0; k < K; ++k) {
      UnitLayout h{k ? "lm_head" + std::to_string(k) : "lm_head", {}, 0, {}};
      add(h, "lm_head", -1, {R, C}, true, tensor, "lm_head.weight", d.vocab_size, k * R);
      units.push_back(std::move(h));
    }
  }
  return units;
}

double llama_num_params_f64(const ModelDims& dims, const LlamaVariant& v) {
  const ModelDims d = derive_dims(dims);
  const double C = d.n_embd, hd = d.head_dim, F = d.intermediate_size, qkv = (d.n_head + 2.0 * d.n_kv_head) * hd;
  const double block = (v.sandwich_norms ? 4 : 2) * C + qkv * C + (d.attention_bias ? qkv : 0) + (v.qk_norm ? 2 * hd : 0) +
                       C * d.n_head * hd + 3 * F * C;
  return static_cast<double>(d.padded_vocab_size) * C * (d.tie_word_embeddings ? 1 : 2) + d.n_layer * block + C;
}

std::vector<float> llama_inv_freq(const ModelDims& dims) {
  const ModelDims d = derive_dims(dims);
  // In f32 as transformers computes them (base ** (arange(0, hd, 2) / hd), then the scaling), so
  // the angles agree with its to the last bit or two.
  const int half = d.head_dim / 2;
  std::vector<float> f(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i)
    f[size_t(i)] = 1.0f / std::pow(static_cast<float>(d.rope_theta), static_cast<float>(2 * i) / static_cast<float>(d.head_dim));
  const RopeScaling& r = d.rope_scaling;
  if (r.rope_type != "llama3") return f;
  // Llama 3.1: wavelengths beyond the original context divided by `factor`, those below
  // context / high_freq_factor kept, the band between interpolated.
  const float factor = static_cast<float>(r.factor), lo = static_cast<float>(r.low_freq_factor),
              hi = static_cast<float>(r.high_freq_factor), ctx = static_cast<float>(r.original_max_position_embeddings);
  const float low_freq_wavelen = ctx / lo, high_freq_wavelen = ctx / hi;
  for (float& x : f) {
    const float wavelen = 2.0f * std::numbers::pi_v<float> / x;
    const float scaled = wavelen > low_freq_wavelen ? x / factor : x;
    if (wavelen < high_freq_wavelen || wavelen > low_freq_wavelen) {
      x = scaled;
      continue;
    }
    const float smooth = (ctx / wavelen - lo) / (hi - lo);
    x = (1.0f - smooth) * scaled / factor + smooth * scaled;
  }
  return f;
}

Tensor qk_rmsnorm(Tape& tape, const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const ModelDims& d,
                  float norm_offset) {
  const float eps = static_cast<float>(d.rms_norm_eps);
  const int64_t hd = d.head_dim, q = d.n_head * hd, kv = int64_t{d.n_kv_head} * hd;
  // Each head a row of hd: (..., H*hd) as (..., H, hd), normalised over its last dimension.
  auto per_head = [&](const Tensor& x, const Tensor& w) {
    Shape heads = x.shape();
    heads.back() /= hd;
    heads.push_back(hd);
    return ops::reshape(tape, ops::rmsnorm(tape, ops::reshape(tape, x, heads), w, eps, norm_offset), x.shape());
  };
  return ops::concat(tape, {per_head(ops::narrow(tape, qkv, 0, q), q_norm), per_head(ops::narrow(tape, qkv, q, kv), k_norm),
                            ops::narrow(tape, qkv, q + kv, kv)});
}

Tensor llama_block(Tape& tape, const LlamaBlockParams& p, const Tensor& x, const Tensor& inv_freq, const ModelDims& d,
                   const LlamaVariant& v, bool sliding, AttentionKernel attention) {
  const float eps = static_cast<float>(d.rms_norm_eps), off = v.norm_offset;
  auto norm = [&](const Tensor& t, const Tensor& w) { return ops::rmsnorm(tape, t, w, eps, off); };
  auto lora = [&](LlamaProjection k) -> const LoraTerms& { return projection_lora(p.lora, k); };
  Tensor qkv = adapted_linear(tape, norm(x, p.input_norm), p.qkv, p.qkv_bias, lora(kQkvProjection));
  if (v.qk_norm) qkv = qk_rmsnorm(tape, qkv, p.q_norm, p.k_norm, d, off);
  qkv = ops::rope(tape, qkv, inv_freq, d.n_head, d.n_kv_head);
  AttentionOptions o;
  if (d.query_pre_attn_scalar > 0) o.scale = static_cast<float>(1.0 / std::sqrt(d.query_pre_attn_scalar));
  if (sliding) o.window = d.sliding_window;
  Tensor a = adapted_linear(tape, ops::attention(tape, qkv, d.n_head, d.n_kv_head, attention, o), p.o_proj, Tensor(),
                            lora(kOProjection));
  // Llama normalises the MLP's input with post_attention_layernorm; Gemma the attention's output,
  // and the MLP's input and output with norms of their own.
  if (v.sandwich_norms) a = norm(a, p.post_norm);
  Tensor x2 = ops::add(tape, x, a);
  Tensor gate_up = adapted_linear(tape, norm(x2, v.sandwich_norms ? p.pre_ff_norm : p.post_norm), p.gate_up, Tensor(),
                                  lora(kGateUpProjection));
  Tensor g = v.geglu ? ops::geglu(tape, gate_up) : ops::swiglu(tape, gate_up);
  Tensor m = adapted_linear(tape, g, p.down_proj, Tensor(), lora(kDownProjection));
  if (v.sandwich_norms) m = norm(m, p.post_ff_norm);
  return ops::add(tape, x2, m);
}

namespace {
int resolved_units(const ModelDims& d, const LlamaVariant& v, int embedding_units) {
  check_dims(derive_dims(d));
  return embedding_units ? embedding_units : llama_embedding_units(d, v);
}
}  // namespace

Llama::Llama(const ModelDims& d, int embedding_units, const LlamaVariant& v)
    : Llama(d, v, resolved_units(d, v, embedding_units), Resolved{}) {}

Llama::Llama(const ModelDims& d, const LlamaVariant& v, int K, Resolved)
    : Model(v.arch, d, llama_layout(d, v, K), K), variant_(v) {
  ModelDims local = derive_dims(d);  // the sliding layers' RoPE: their own base, unscaled
  local.rope_theta = local.rope_local_base_freq, local.rope_scaling = RopeScaling{};
  inv_freq_host_[0] = llama_inv_freq(d);
  inv_freq_host_[1] = llama_inv_freq(local);
}

double Llama::flops_per_token(int T) const {
  // 6 per parameter that multiplies (the blocks' and the head's; an untied embedding is a
  // lookup), plus attention's two T-long products: 6 L n_head head_dim T, llm.c's count.
  const ModelDims& d = dims();
  const double table = static_cast<double>(d.padded_vocab_size) * d.n_embd;
  const double multiplied = static_cast<double>(num_params()) - (d.tie_word_embeddings ? 0.0 : table);
  if (d.sliding_window == 0) return 6.0 * multiplied + 6.0 * d.n_layer * d.n_head * d.head_dim * static_cast<double>(T);
  // A sliding layer's products are min(T, window) long.
  double attended = 0;
  for (int l = 0; l < d.n_layer; ++l) attended += d.sliding_layer(l) ? std::min(T, d.sliding_window) : T;
  return 6.0 * multiplied + 6.0 * d.n_head * d.head_dim * attended;
}

int64_t Llama::deepspeed_largest_layer() const {
  const ModelDims& d = dims();
  const int64_t C = d.n_embd, q = int64_t{d.n_head} * d.head_dim;
  return std::max({int64_t{d.padded_vocab_size} * C, q * C + (d.attention_bias ? q : 0), int64_t{d.intermediate_size} * C});
}

void Llama::for_each_param_in_file_order(const std::function<void(int unit, int index)>& f) const {
  for (int u = 0; u < base_units(); ++u)
    for (int i = 0; i < static_cast<int>(layout()[size_t(u)].params.size()); ++i) f(u, i);
}

const Tensor& Llama::inv_freq_on(const Tensor& like, bool local) {
  Tensor& t = inv_freq_[local];
  if (!t.defined() || t.device() != like.device()) {
    const std::vector<float>& f = inv_freq_host_[local];
    Tensor host = Tensor::empty({static_cast<int64_t>(f.size())}, DType::f32, MemCategory::other);
    std::copy(f.begin(), f.end(), host.data<float>());
    t = host.on(like.allocator(), MemCategory::other);
  }
  return t;
}

Tensor Llama::embed(Tape& tape, const Tensor& host_tokens) {
  const int K = embedding_units();
  check_tokens(host_tokens, dims().padded_vocab_size);
  const Tensor tokens = host_tokens.on(param(0, 0).allocator(), MemCategory::activations);
  // The padding token's positions add nothing to its row's gradient (torch's padding_idx).
  Tensor grad_tokens;
  if (const int pad = dims().pad_token_id; pad >= 0 && tape.recording()) {
    grad_tokens = Tensor::empty(host_tokens.shape(), DType::i32, MemCategory::activations);
    const int32_t* t = host_tokens.data<int32_t>();
    int32_t* g = grad_tokens.data<int32_t>();
    for (int64_t i = 0; i < host_tokens.numel(); ++i) g[i] = t[i] == pad ? INT32_MAX : t[i];
  }
  Tensor x;
  for (int k = 0; k < K; ++k) {  // tokens outside a range add zeros
    tape.begin_unit(k);
    Tensor part = ops::embedding(tape, tokens, param(k, 0), Tensor(), layout()[size_t(k)].params[0].row0, grad_tokens);
    x = k ? ops::add(tape, x, part) : part;
    // Gemma scales the embeddings by sqrt(n_embd), in the activations' dtype as transformers
    // casts its buffer to the weights'.
    if (k == K - 1 && variant_.scaled_embedding) {
      float s = static_cast<float>(std::sqrt(static_cast<double>(dims().n_embd)));
      if (x.dtype() == DType::bf16) s = bf16_to_f32(f32_to_bf16(s));
      x = ops::scale(tape, x, s);
    }
    tape.end_unit(k);
  }
  return x;
}

Tensor Llama::block(Tape& tape, int layer, const Tensor& x) {
  const int u = block_unit(layer);
  const BlockIndex bi(dims().attention_bias, variant_);
  const Tensor none;
  const BlockLora adapters{lora_terms(u, bi.q, 3), lora_terms(u, bi.o, 1), lora_terms(u, bi.gate, 2),
                                      lora_terms(u, bi.down, 1)};
  const LlamaBlockParams p{param(u, bi.input_norm),
                           fused(u, kQkv),
                           dims().attention_bias ? fused(u, kQkvBias) : none,
                           param(u, bi.o),
                           param(u, bi.post_norm),
                           fused(u, kGateUp),
                           param(u, bi.down),
                           variant_.qk_norm ? param(u, bi.q_norm) : none,
                           variant_.qk_norm ? param(u, bi.k_norm) : none,
                           variant_.sandwich_norms ? param(u, bi.pre_ff) : none,
                           variant_.sandwich_norms ? param(u, bi.post_ff) : none,
                           lora().enabled() ? &adapters : nullptr};
  const bool sliding = dims().sliding_layer(layer);
  return llama_block(tape, p, x, inv_freq_on(x, sliding), dims(), variant_, sliding, attention_kernel());
}

std::vector<Tensor> Llama::head(Tape& tape, const Tensor& x) {
  const int f = final_unit();
  tape.begin_unit(f);
  const Tensor xn = ops::rmsnorm(tape, x, param(f, 0), static_cast<float>(dims().rms_norm_eps), variant_.norm_offset);
  tape.end_unit(f);
  std::vector<Tensor> parts;
  for (int k = 0; k < embedding_units(); ++k) {
    const int u = head_unit(k);
    tape.begin_unit(u);
    parts.push_back(ops::linear(tape, xn, param(u, 0), Tensor()));
    tape.end_unit(u);
  }
  return parts;
}

}  // namespace zt
