#include "models/gpt2.hpp"

#include <cmath>
#include <stdexcept>

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

void add_param(UnitLayout& u, std::string name, int layer, Shape shape, bool decay) {
  const int64_t n = shape_numel(shape);
  u.params.push_back({std::move(name), layer, std::move(shape), u.numel, decay});
  u.numel += n;
}

}  // namespace

std::vector<UnitLayout> gpt2_layout(const GPT2Dims& d) {
  const int64_t C = d.n_embd;
  std::vector<UnitLayout> units;
  UnitLayout emb{"embedding", {}, 0};
  add_param(emb, "wte", -1, {d.padded_vocab_size, C}, true);
  add_param(emb, "wpe", -1, {d.max_seq_len, C}, true);
  units.push_back(std::move(emb));
  for (int l = 0; l < d.n_layer; ++l) {
    UnitLayout b{"block" + std::to_string(l), {}, 0};
    for (const BlockParam& p : kBlockParams) {
      Shape s = p.rows_mult ? Shape{p.rows_mult * C, p.cols_mult * C} : Shape{p.cols_mult * C};
      add_param(b, p.name, l, s, p.decay);
    }
    units.push_back(std::move(b));
  }
  UnitLayout fin{"final", {}, 0};
  add_param(fin, "lnfw", -1, {C}, false);
  add_param(fin, "lnfb", -1, {C}, false);
  units.push_back(std::move(fin));
  return units;
}

int64_t gpt2_num_params(const GPT2Dims& d) {
  int64_t n = 0;
  for (const UnitLayout& u : gpt2_layout(d)) n += u.numel;
  return n;
}

double gpt2_flops_per_token(const GPT2Dims& d, int T) {
  return 6.0 * static_cast<double>(gpt2_num_params(d)) + 6.0 * d.n_layer * d.n_embd * static_cast<double>(T);
}

std::string dims_str(const GPT2Dims& d) {
  return "n_layer " + std::to_string(d.n_layer) + ", n_head " + std::to_string(d.n_head) + ", n_embd " +
         std::to_string(d.n_embd) + ", vocab_size " + std::to_string(d.vocab_size) + ", padded_vocab_size " +
         std::to_string(d.padded_vocab_size) + ", max_seq_len " + std::to_string(d.max_seq_len);
}

GPT2::GPT2(const GPT2Dims& d) : dims_(d), layout_(gpt2_layout(d)), bound_(layout_.size()) {
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
  uint64_t index = 0;  // the stream of the unit's first tensor: tensors are numbered across units
  for (int v = 0; v < u; ++v) index += layout_[v].params.size();
  for (size_t i = 0; i < layout_[u].params.size(); ++i, ++index) {
    const ParamSpec& p = layout_[u].params[i];
    const Tensor& t = bound_.at(u).at(i);
    if (p.shape.size() == 1) {  // layernorm weights 1; layernorm and linear biases 0
      t.fill(p.name.starts_with("ln") && p.name.ends_with("w") ? 1.0f : 0.0f);
      continue;
    }
    const bool resid = p.name == "attprojw" || p.name == "fcprojw";
    int64_t rows = p.shape[0];
    if (p.name == "wte") rows = dims_.vocab_size;  // padded rows stay zero
    t.zero();
    fill_normal(t.data<float>(), static_cast<size_t>(rows * p.shape[1]), resid ? std_resid : 0.02f, seed, index);
  }
}

std::vector<int> GPT2::borrowed_units(int u) const {
  if (u == num_units() - 1) return {0};
  return {};
}

Tensor GPT2::hidden(Tape& tape, const Tensor& tokens) {
  const int L = dims_.n_layer;
  tape.begin_unit(0);
  Tensor x = ops::embedding(tape, tokens, param(0, 0), param(0, 1));
  tape.end_unit(0);
  for (int l = 0; l < L; ++l) {
    const int u = 1 + l;
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

Tensor GPT2::logits(Tape& tape, const Tensor& tokens) {
  Tensor x = hidden(tape, tokens);
  const int u = num_units() - 1;
  tape.begin_unit(u);
  Tensor out = ops::linear(tape, ops::layernorm(tape, x, param(u, 0), param(u, 1)), param(0, 0), Tensor());
  tape.end_unit(u);
  return out;
}

Tensor GPT2::forward(Tape& tape, const Tensor& tokens, const Tensor& targets) {
  return ops::cross_entropy(tape, logits(tape, tokens), targets, dims_.vocab_size);
}

}  // namespace zt
