#include "models/gpt2.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/backend.hpp"
#include "kernels/ops.hpp"
#include "models/init.hpp"

namespace zt {

namespace {

// llm.c's per-layer tensors, in its order; offsets below follow this order within a block.
struct BlockParam {
  const char* name;
  int rows_mult;  // rows as a multiple of C (0: a vector)
  int cols_mult;  // columns as a multiple of C
  bool decay;
};
constexpr BlockParam kBlockParams[] = {
    {"ln1w", 0, 1, false},     {"ln1b", 0, 1, false},     {"qkvw", 3, 1, true},     {"qkvb", 0, 3, false},
    {"attprojw", 1, 1, true},  {"attprojb", 0, 1, false}, {"ln2w", 0, 1, false},    {"ln2b", 0, 1, false},
    {"fcw", 4, 1, true},       {"fcb", 0, 4, false},      {"fcprojw", 1, 4, true},  {"fcprojb", 0, 1, false},
};
enum BlockIndex { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };

void add_param(UnitLayout& u, std::string name, int layer, Shape shape, bool decay, int tensor, int64_t row0 = 0) {
  const int64_t n = shape_numel(shape);
  u.params.push_back({std::move(name), layer, std::move(shape), u.numel, decay, tensor, row0});
  u.numel += n;
}

Shape block_shape(const BlockParam& p, int64_t C) {
  return p.rows_mult ? Shape{p.rows_mult * C, p.cols_mult * C} : Shape{p.cols_mult * C};
}

}  // namespace

void store_f32(const Tensor& t, const Tensor& host) {
  if (t.dtype() == DType::f32) return t.copy_from(host);
  const Tensor low = Tensor::empty(t.shape(), t.dtype(), MemCategory::other);
  backend(Device::cpu).cast(low, host);
  t.copy_from(low);
}

Tensor host_f32(const Tensor& t) {
  if (t.device() == Device::cpu && t.dtype() == DType::f32) return t;
  const Tensor here = t.on(cpu_allocator(), MemCategory::other);
  if (here.dtype() == DType::f32) return here;
  Tensor wide = Tensor::empty(t.shape(), DType::f32, MemCategory::other);
  backend(Device::cpu).cast(wide, here);
  return wide;
}

int gpt2_wte_units(const GPT2Dims& d) {
  int64_t block = 0;
  for (const BlockParam& p : kBlockParams) block += shape_numel(block_shape(p, d.n_embd));
  const int Vp = d.padded_vocab_size;
  for (int k = 1; k < Vp; ++k)
    if (Vp % k == 0 && int64_t{Vp / k} * d.n_embd <= block) return k;
  return Vp;
}

std::vector<UnitLayout> gpt2_layout(const GPT2Dims& d, int wte_units) {
  const int64_t C = d.n_embd;
  const int K = wte_units ? wte_units : gpt2_wte_units(d);
  if (K < 1 || d.padded_vocab_size % K)
    throw std::invalid_argument("gpt2: wte_units " + std::to_string(K) + " must be >= 1 and divide padded_vocab_size " +
                                std::to_string(d.padded_vocab_size));
  const int64_t R = d.padded_vocab_size / K;
  std::vector<UnitLayout> units;
  UnitLayout emb{"embedding", {}, 0};
  add_param(emb, "wte", -1, {R, C}, true, 0);
  add_param(emb, "wpe", -1, {d.max_seq_len, C}, true, 1);
  units.push_back(std::move(emb));
  for (int k = 1; k < K; ++k) {
    UnitLayout w{"wte" + std::to_string(k), {}, 0};
    add_param(w, "wte", -1, {R, C}, true, 0, k * R);
    units.push_back(std::move(w));
  }
  int tensor = 2;
  for (int l = 0; l < d.n_layer; ++l) {
    UnitLayout b{"block" + std::to_string(l), {}, 0};
    for (const BlockParam& p : kBlockParams) add_param(b, p.name, l, block_shape(p, C), p.decay, tensor++);
    units.push_back(std::move(b));
  }
  UnitLayout fin{"final", {}, 0};
  add_param(fin, "lnfw", -1, {C}, false, tensor++);
  add_param(fin, "lnfb", -1, {C}, false, tensor++);
  units.push_back(std::move(fin));
  return units;
}

int64_t gpt2_num_params(const GPT2Dims& d) {
  // By formula, not by building the layout: a header's dimensions can be huge (the fuzzer found a
  // padded vocabulary that made the layout millions of units long).
  const int64_t C = d.n_embd, L = d.n_layer;
  return int64_t{d.padded_vocab_size} * C + int64_t{d.max_seq_len} * C + L * (12 * C * C + 13 * C) + 2 * C;
}

int64_t gpt2_deepspeed_largest_layer(const GPT2Dims& d) {
  const int64_t C = d.n_embd;
  return std::max({int64_t{d.padded_vocab_size} * C, int64_t{d.max_seq_len} * C, 4 * C * C + 4 * C});
}

double gpt2_num_params_f64(const GPT2Dims& d) {
  const double C = d.n_embd;
  return (static_cast<double>(d.padded_vocab_size) + d.max_seq_len) * C + static_cast<double>(d.n_layer) * (12 * C * C + 13 * C) +
         2 * C;
}

double gpt2_flops_per_token(const GPT2Dims& d, int T) {
  return 6.0 * static_cast<double>(gpt2_num_params(d)) + 6.0 * d.n_layer * d.n_embd * static_cast<double>(T);
}

std::string dims_str(const GPT2Dims& d) {
  return "n_layer " + std::to_string(d.n_layer) + ", n_head " + std::to_string(d.n_head) + ", n_embd " +
         std::to_string(d.n_embd) + ", vocab_size " + std::to_string(d.vocab_size) + ", padded_vocab_size " +
         std::to_string(d.padded_vocab_size) + ", max_seq_len " + std::to_string(d.max_seq_len);
}

GPT2::GPT2(const GPT2Dims& d, int wte_units)
    : dims_(d), wte_units_(wte_units ? wte_units : gpt2_wte_units(d)), layout_(gpt2_layout(d, wte_units_)),
      bound_(layout_.size()) {
  if (d.n_embd % d.n_head) throw std::invalid_argument("gpt2: n_embd must divide by n_head");
}

void GPT2::bind_unit(int u, const Tensor& params, const Tensor& grads) {
  const UnitLayout& lay = layout_.at(u);
  if (params.numel() != lay.numel || (grads.defined() && grads.numel() != lay.numel))
    throw std::invalid_argument("gpt2: buffer for unit " + lay.name + " must hold " + std::to_string(lay.numel) + " elements");
  std::vector<Tensor>& ts = bound_[u];
  ts.clear();
  for (const ParamSpec& p : lay.params) {
    Tensor t = params.view(p.offset, p.shape);
    if (grads.defined()) {
      t.set_requires_grad(true);
      t.bind_grad(grads.view(p.offset, p.shape));
    }
    ts.push_back(std::move(t));
  }
}

void GPT2::init(uint64_t seed) {
  for (int u = 0; u < num_units(); ++u) init_unit(u, seed);
}

void GPT2::init_unit(int u, uint64_t seed) {
  const float std_resid = 0.02f / std::sqrt(2.0f * dims_.n_layer);
  for (size_t i = 0; i < layout_[u].params.size(); ++i) {
    const ParamSpec& p = layout_[u].params[i];
    const Tensor& t = bound_.at(u).at(i);
    if (p.shape.size() == 1) {  // layernorm weights 1; layernorm and linear biases 0
      t.fill(p.name.starts_with("ln") && p.name.ends_with("w") ? 1.0f : 0.0f);
      continue;
    }
    const bool resid = p.name == "attprojw" || p.name == "fcprojw";
    int64_t rows = p.shape[0];
    if (p.name == "wte") rows = std::clamp<int64_t>(dims_.vocab_size - p.row0, 0, rows);  // padded rows stay zero
    // Drawn in f32 on the host; a device or 16-bit tensor takes the values rounded once.
    const bool direct = t.device() == Device::cpu && t.dtype() == DType::f32;
    const Tensor host = direct ? t : Tensor::empty(p.shape, DType::f32, MemCategory::other);
    host.zero();
    // A row range of wte draws its part of the whole tensor's stream, so every K gives one model.
    fill_normal(host.data<float>(), static_cast<size_t>(rows * p.shape[1]), resid ? std_resid : 0.02f, seed,
                static_cast<uint64_t>(p.tensor), static_cast<size_t>(p.row0 * p.shape[1]));
    if (!direct) store_f32(t, host);
  }
}

Tensor GPT2::hidden(Tape& tape, const Tensor& host_tokens) {
  const int L = dims_.n_layer, K = wte_units_;
  const int32_t* tok = host_tokens.data<int32_t>();
  for (int64_t i = 0, n = host_tokens.numel(); i < n; ++i)
    if (tok[i] < 0 || tok[i] >= dims_.padded_vocab_size)
      throw std::invalid_argument("embedding: token id " + std::to_string(tok[i]) + " outside [0, " +
                                  std::to_string(dims_.padded_vocab_size) + ")");
  // Checked here, then copied once to the parameters' device for the K embedding units.
  const Tensor& wte = param(0, 0);
  const Tensor tokens = host_tokens.on(wte.allocator(), MemCategory::activations);
  tape.begin_unit(0);
  Tensor x = ops::embedding(tape, tokens, param(0, 0), param(0, 1));
  tape.end_unit(0);
  for (int k = 1; k < K; ++k) {  // tokens outside a range add zeros: x is wte[token] + wpe[t] exactly
    tape.begin_unit(k);
    x = ops::add(tape, x, ops::embedding(tape, tokens, param(k, 0), Tensor(), layout_[k].params[0].row0));
    tape.end_unit(k);
  }
  for (int l = 0; l < L; ++l) {
    const int u = K + l;
    auto p = [&](int i) -> const Tensor& { return param(u, i); };
    tape.begin_unit(u);
    Tensor h = ops::layernorm(tape, x, p(LN1W), p(LN1B));
    Tensor qkv = ops::linear(tape, h, p(QKVW), p(QKVB));
    Tensor y = ops::attention(tape, qkv, dims_.n_head);
    Tensor x2 = ops::add(tape, x, ops::linear(tape, y, p(ATTPROJW), p(ATTPROJB)));
    Tensor h2 = ops::layernorm(tape, x2, p(LN2W), p(LN2B));
    Tensor f = ops::gelu(tape, ops::linear(tape, h2, p(FCW), p(FCB)));
    x = ops::add(tape, x2, ops::linear(tape, f, p(FCPROJW), p(FCPROJB)));
    tape.end_unit(u);
  }
  return x;
}

std::vector<Tensor> GPT2::logit_parts(Tape& tape, const Tensor& tokens) {
  const Tensor x = hidden(tape, tokens);
  const int f = num_units() - 1;
  tape.begin_unit(f);
  const Tensor xn = ops::layernorm(tape, x, param(f, 0), param(f, 1));
  tape.end_unit(f);
  std::vector<Tensor> parts;
  for (int k = 0; k < wte_units_; ++k) {  // the head, tied to wte: [Note: the tied embedding's units]
    tape.begin_unit(k);
    parts.push_back(ops::linear(tape, xn, param(k, 0), Tensor()));
    tape.end_unit(k);
  }
  return parts;
}

Tensor GPT2::logits(Tape& tape, const Tensor& tokens) {
  Tape::NoGrad no_grad(tape);
  std::vector<Tensor> parts = logit_parts(tape, tokens);
  for (Tensor& p : parts) p = host_f32(p);
  if (parts.size() == 1) return parts[0];
  const int64_t R = parts[0].dim(-1), N = parts[0].numel() / R, K = static_cast<int64_t>(parts.size());
  Shape s = parts[0].shape();
  s.back() = K * R;
  Tensor out = Tensor::empty(s, DType::f32, MemCategory::activations);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < N; ++i)
      std::copy_n(parts[k].data<float>() + i * R, R, out.data<float>() + (i * K + k) * R);
  return out;
}

Tensor GPT2::forward(Tape& tape, const Tensor& tokens, const Tensor& targets) {
  return ops::cross_entropy(tape, logit_parts(tape, tokens), targets, dims_.vocab_size);
}

}  // namespace zt
