#include "models/gpt2.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/ops.hpp"
#include "models/init.hpp"

namespace zt {

namespace {

// llm.c's per-layer tensors, in its order; offsets below follow this order within a block.
// Each with Hugging Face's name within "h.<layer>."; its Conv1D weights are stored (in, out).
// GPT-2's initialisation: normal(0, 0.02), the projections into the residual stream scaled by
// 1/sqrt(2L); layernorm weights 1, biases 0.
enum class Init { normal, residual, one, zero };
struct BlockParam {
  const char* name;
  int rows_mult;  // rows as a multiple of C (0: a vector)
  int cols_mult;  // columns as a multiple of C
  bool decay;
  const char* hf_name;
  Init init;
};
constexpr BlockParam kBlockParams[] = {
    {"ln1w", 0, 1, false, "ln_1.weight", Init::one},
    {"ln1b", 0, 1, false, "ln_1.bias", Init::zero},
    {"qkvw", 3, 1, true, "attn.c_attn.weight", Init::normal},
    {"qkvb", 0, 3, false, "attn.c_attn.bias", Init::zero},
    {"attprojw", 1, 1, true, "attn.c_proj.weight", Init::residual},
    {"attprojb", 0, 1, false, "attn.c_proj.bias", Init::zero},
    {"ln2w", 0, 1, false, "ln_2.weight", Init::one},
    {"ln2b", 0, 1, false, "ln_2.bias", Init::zero},
    {"fcw", 4, 1, true, "mlp.c_fc.weight", Init::normal},
    {"fcb", 0, 4, false, "mlp.c_fc.bias", Init::zero},
    {"fcprojw", 1, 4, true, "mlp.c_proj.weight", Init::residual},
    {"fcprojb", 0, 1, false, "mlp.c_proj.bias", Init::zero},
};
enum BlockIndex { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };

// A whole tensor (or wte's rows from row0) as Hugging Face's GPT2LMHeadModel names it; its
// matrices in the blocks are Conv1D's, stored transposed.
void add(UnitLayout& u, std::string name, int layer, Shape shape, bool decay, int tensor, std::string hf_name,
         int64_t hf_rows, Init init, int n_layer, int64_t row0 = 0) {
  const bool transposed = layer >= 0 && shape.size() == 2;
  const float std = init == Init::normal ? 0.02f : init == Init::residual ? 0.02f / std::sqrt(2.0f * n_layer) : 0.0f;
  add_param(u, {std::move(name), layer, std::move(shape), 0, decay, tensor, row0, true, std::move(hf_name), hf_rows,
                transposed, std, init == Init::one ? 1.0f : 0.0f});
}

Shape block_shape(const BlockParam& p, int64_t C) {
  return p.rows_mult ? Shape{p.rows_mult * C, p.cols_mult * C} : Shape{p.cols_mult * C};
}

}  // namespace

int gpt2_wte_units(const ModelDims& d) {
  int64_t block = 0;
  for (const BlockParam& p : kBlockParams) block += shape_numel(block_shape(p, d.n_embd));
  return row_range_units(d.padded_vocab_size, d.n_embd, block);
}

std::vector<UnitLayout> gpt2_layout(const ModelDims& d, int wte_units) {
  const int64_t C = d.n_embd;
  const int K = wte_units ? wte_units : gpt2_wte_units(d);
  const int64_t R = row_range_rows("gpt2: wte_units", K, d.padded_vocab_size);
  std::vector<UnitLayout> units;
  UnitLayout emb{"embedding", {}, 0, {}};
  const int L = d.n_layer;
  add(emb, "wte", -1, {R, C}, true, 0, "wte.weight", d.vocab_size, Init::normal, L);
  add(emb, "wpe", -1, {d.max_seq_len, C}, true, 1, "wpe.weight", d.max_seq_len, Init::normal, L);
  units.push_back(std::move(emb));
  for (int k = 1; k < K; ++k) {
    UnitLayout w{"wte" + std::to_string(k), {}, 0, {}};
    add(w, "wte", -1, {R, C}, true, 0, "wte.weight", d.vocab_size, Init::normal, L, k * R);
    units.push_back(std::move(w));
  }
  int tensor = 2;
  for (int l = 0; l < d.n_layer; ++l) {
    UnitLayout b{"block" + std::to_string(l), {}, 0, {}};
    for (const BlockParam& p : kBlockParams) {
      const Shape shape = block_shape(p, C);
      add(b, p.name, l, shape, p.decay, tensor++, "h." + std::to_string(l) + "." + p.hf_name, shape[0], p.init, L);
    }
    units.push_back(std::move(b));
  }
  UnitLayout fin{"final", {}, 0, {}};
  add(fin, "lnfw", -1, {C}, false, tensor++, "ln_f.weight", C, Init::one, L);
  add(fin, "lnfb", -1, {C}, false, tensor++, "ln_f.bias", C, Init::zero, L);
  units.push_back(std::move(fin));
  return units;
}

int64_t gpt2_num_params(const ModelDims& d) {
  // By formula, not by building the layout: a header's dimensions can be huge (the fuzzer found a
  // padded vocabulary that made the layout millions of units long).
  const int64_t C = d.n_embd, L = d.n_layer;
  return int64_t{d.padded_vocab_size} * C + int64_t{d.max_seq_len} * C + L * (12 * C * C + 13 * C) + 2 * C;
}

int64_t gpt2_deepspeed_largest_layer(const ModelDims& d) {
  const int64_t C = d.n_embd;
  return std::max({int64_t{d.padded_vocab_size} * C, int64_t{d.max_seq_len} * C, 4 * C * C + 4 * C});
}

double gpt2_num_params_f64(const ModelDims& d) {
  const double C = d.n_embd;
  return (static_cast<double>(d.padded_vocab_size) + d.max_seq_len) * C + static_cast<double>(d.n_layer) * (12 * C * C + 13 * C) +
         2 * C;
}

double gpt2_flops_per_token(const ModelDims& d, int T) {
  return 6.0 * static_cast<double>(gpt2_num_params(d)) + 6.0 * d.n_layer * d.n_embd * static_cast<double>(T);
}

namespace {
int resolved_wte_units(const ModelDims& d, int wte_units) {
  if (d.n_embd % d.n_head) throw std::invalid_argument("gpt2: n_embd must divide by n_head");
  return wte_units ? wte_units : gpt2_wte_units(d);
}
}  // namespace

GPT2::GPT2(const ModelDims& d, int wte_units) : GPT2(d, resolved_wte_units(d, wte_units), Resolved{}) {}

GPT2::GPT2(const ModelDims& d, int K, Resolved) : Model("gpt2", d, gpt2_layout(d, K), K) {}

void GPT2::for_each_param_in_file_order(const std::function<void(int unit, int index)>& f) const {
  const int L = dims().n_layer, K = wte_units();
  for (int k = 0; k < K; ++k) f(k, 0);  // wte, its row ranges in order
  f(0, 1);                              // wpe
  const int per_block = static_cast<int>(std::size(kBlockParams));
  for (int k = 0; k < per_block; ++k)
    for (int l = 0; l < L; ++l) f(K + l, k);
  f(base_units() - 1, 0);  // lnfw
  f(base_units() - 1, 1);  // lnfb
}

Tensor gpt2_block(Tape& tape, std::span<const Tensor> p, const Tensor& x, int n_head, AttentionKernel attention,
                  const BlockLora* lora) {
  auto terms = [&](Gpt2Projection k) -> const LoraTerms& { return projection_lora(lora, k); };
  Tensor h = ops::layernorm(tape, x, p[LN1W], p[LN1B]);
  Tensor qkv = adapted_linear(tape, h, p[QKVW], p[QKVB], terms(kAttnProjection));
  Tensor y = ops::attention(tape, qkv, n_head, n_head, attention);
  Tensor x2 = ops::add(tape, x, adapted_linear(tape, y, p[ATTPROJW], p[ATTPROJB], terms(kAttnOutProjection)));
  Tensor h2 = ops::layernorm(tape, x2, p[LN2W], p[LN2B]);
  Tensor f = ops::gelu(tape, adapted_linear(tape, h2, p[FCW], p[FCB], terms(kFcProjection)));
  return ops::add(tape, x2, adapted_linear(tape, f, p[FCPROJW], p[FCPROJB], terms(kFcOutProjection)));
}

Tensor GPT2::embed(Tape& tape, const Tensor& host_tokens) {
  const int K = wte_units();
  check_tokens(host_tokens, dims().padded_vocab_size);
  // Checked here, then copied once to the parameters' device for the K embedding units.
  const Tensor tokens = host_tokens.on(param(0, 0).allocator(), MemCategory::activations);
  tape.begin_unit(0);
  Tensor x = ops::embedding(tape, tokens, param(0, 0), param(0, 1));
  tape.end_unit(0);
  for (int k = 1; k < K; ++k) {  // tokens outside a range add zeros: x is wte[token] + wpe[t] exactly
    tape.begin_unit(k);
    x = ops::add(tape, x, ops::embedding(tape, tokens, param(k, 0), Tensor(), layout()[size_t(k)].params[0].row0));
    tape.end_unit(k);
  }
  return x;
}

Tensor GPT2::block(Tape& tape, int layer, const Tensor& x) {
  const int u = block_unit(layer);
  const BlockLora adapters{lora_terms(u, QKVW, 1), lora_terms(u, ATTPROJW, 1), lora_terms(u, FCW, 1),
                                          lora_terms(u, FCPROJW, 1)};
  return gpt2_block(tape, unit_params(u), x, dims().n_head, attention_kernel(), lora().enabled() ? &adapters : nullptr);
}

std::vector<Tensor> GPT2::head(Tape& tape, const Tensor& x) {
  const int f = base_units() - 1;
  tape.begin_unit(f);
  const Tensor xn = ops::layernorm(tape, x, param(f, 0), param(f, 1));
  tape.end_unit(f);
  std::vector<Tensor> parts;
  for (int k = 0; k < wte_units(); ++k) {  // the head, tied to wte: [Note: the tied embedding's units]
    tape.begin_unit(k);
    parts.push_back(ops::linear(tape, xn, param(k, 0), Tensor()));
    tape.end_unit(k);
  }
  return parts;
}

}  // namespace zt
