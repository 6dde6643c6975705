// The sweep's table: one row per op of zt::Backend (tests/backend_ops.hpp), in the order of
// kernels/backend.hpp. References are the plain loops of tests/reference.hpp in double. Shapes
// are small and awkward: sizes of 1, primes, C and OC off multiples of 8 and 16, T = 1, several
// heads, B*T a multiple of nothing; where the CUDA kernels document a limit (bf16 GEMMs, head
// sizes, one logit part), `takes` says so and the CUDA sweep checks the refusal.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/backend_ops.hpp"
#include "tests/reference.hpp"

namespace zt::sweep {

namespace {

using Ins = std::vector<DVec>;
using Outs = std::vector<DVec>;

size_t numel(const Shape& s) { return static_cast<size_t>(shape_numel(s)); }

DVec normal(std::mt19937& gen, size_t n, double sd = 1.0) {
  std::normal_distribution<double> d(0.0, sd);
  DVec v(n);
  for (double& x : v) x = d(gen);
  return v;
}

DVec ids(std::mt19937& gen, size_t n, int hi) {  // uniform in [0, hi)
  std::uniform_int_distribution<int> d(0, hi - 1);
  DVec v(n);
  for (double& x : v) x = d(gen);
  return v;
}

std::vector<int32_t> as_ids(const DVec& v) { return {v.begin(), v.end()}; }

In input(const char* name, const Shape& s, DType t, DVec v, bool grad = false) {
  return In{name, s, t, std::move(v), grad};
}
// An output the backward is seeded at with random douts, or a saved one (seeded = false).
Out output(const char* name, const Shape& s, DType t, std::mt19937& gen, bool seeded = true) {
  return Out{name, s, t, seeded ? normal(gen, numel(s)) : DVec{}};
}

Tensor at(const std::vector<Tensor>& ts, int i) { return i < 0 ? Tensor() : ts[static_cast<size_t>(i)]; }

bool on_cuda(const Backend& be) { return be.device() == Device::cuda; }

// ---- the model's ops ----

OpRow encoder() {
  // wte holds the table's rows [row0, row0+rows) of Vp; tokens outside them take zeros.
  auto dims = [](int B, int T, int C, int Vp, int maxT, int row0, int rows, int wte, int wpe) {
    return Dims{{"B", B}, {"T", T}, {"C", C}, {"Vp", Vp}, {"maxT", maxT}, {"row0", row0}, {"rows", rows},
                {"wte", wte}, {"wpe", wpe}};
  };
  return {"encoder",
          {dims(1, 1, 1, 1, 1, 0, 1, 1, 1), dims(2, 7, 13, 11, 10, 0, 11, 1, 1),
           dims(3, 5, 70, 9, 5, 0, 9, 1, 1),       // C = 70: two of the CPU backward's 64-column strips
           dims(2, 7, 13, 11, 10, 4, 5, 1, 1),     // a row range of the tied embedding
           dims(1, 3, 8, 5, 3, 2, 3, 1, 0), dims(3, 1, 17, 4, 2, 0, 4, 0, 1)},  // no wpe; no wte
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int B = d["B"], T = d["T"], C = d["C"], Vp = d["Vp"], maxT = d["maxT"], row0 = d["row0"],
                      rows = d["rows"];
            Problem p;
            p.in.push_back(input("tokens", {B, T}, DType::i32, ids(gen, size_t(B) * T, Vp)));
            const int iwte = d["wte"] ? 1 : -1, iwpe = d["wpe"] ? 1 + d["wte"] : -1;
            if (iwte > 0) p.in.push_back(input("wte", {rows, C}, ty.dt, normal(gen, size_t(rows) * C), true));
            if (iwpe > 0) p.in.push_back(input("wpe", {maxT, C}, ty.dt, normal(gen, size_t(maxT) * C), true));
            for (size_t i = 1; i < p.in.size(); ++i) p.in[i].exact_zeros = true;  // rows no token reads
            p.out.push_back(output("out", {B, T, C}, ty.dt, gen));
            p.out[0].exact_zeros = true;
            p.reference = [=](const Ins& in) {
              // The whole (Vp,C) table, zero outside wte's rows; a zero wpe where there is none.
              DVec table(size_t(Vp) * C, 0.0), pos(size_t(maxT) * C, 0.0), out(size_t(B) * T * C);
              if (iwte > 0) std::copy(in[1].begin(), in[1].end(), table.begin() + long(row0) * C);
              if (iwpe > 0) pos = in[size_t(iwpe)];
              ref::encoder_forward(out.data(), as_ids(in[0]).data(), table.data(), pos.data(), B, T, C);
              return Outs{out};
            };
            p.forward = [=](const Backend& be, Call& c) {
              be.encoder_forward(c.out[0], c.in[0], at(c.in, iwte), at(c.in, iwpe), row0);
            };
            p.backward = [=](const Backend& be, Call& c) {
              be.encoder_backward(at(c.grad, iwte), at(c.grad, iwpe), c.dout[0], c.in[0], row0);
            };
            return p;
          }};
}

OpRow layernorm() {
  auto dims = [](int B, int T, int C) { return Dims{{"B", B}, {"T", T}, {"C", C}}; };
  return {"layernorm",
          {dims(1, 1, 1), dims(2, 3, 5), dims(1, 13, 37), dims(3, 5, 24), dims(2, 7, 200)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int B = d["B"], T = d["T"], C = d["C"], N = B * T;
            DVec x = normal(gen, size_t(N) * C, 2.0);
            for (size_t i = 0; i < x.size(); ++i) x[i] += double(i / size_t(C));  // a mean per row
            for (int c = 0; c < C; ++c) x[size_t(c)] *= 0.002;  // row 0: variance ~ eps, so that eps matters
            Problem p;
            p.in = {input("x", {B, T, C}, ty.dt, x, true), input("weight", {C}, ty.dt, normal(gen, size_t(C)), true),
                    input("bias", {C}, ty.dt, normal(gen, size_t(C)), true)};
            p.out = {output("out", {B, T, C}, ty.dt, gen), output("mean", {N}, DType::f32, gen, false),
                     output("rstd", {N}, DType::f32, gen, false)};
            p.reference = [=](const Ins& in) {
              Outs o{DVec(size_t(N) * C), DVec(size_t(N)), DVec(size_t(N))};
              ref::layernorm_forward(o[0].data(), o[1].data(), o[2].data(), in[0].data(), in[1].data(), in[2].data(),
                                     N, C);
              return o;
            };
            p.forward = [](const Backend& be, Call& c) {
              be.layernorm_forward(c.out[0], c.out[1], c.out[2], c.in[0], c.in[1], c.in[2]);
            };
            p.backward = [](const Backend& be, Call& c) {
              be.layernorm_backward(c.grad[0], c.grad[1], c.grad[2], c.dout[0], c.in[0], c.in[1], c.out[1], c.out[2]);
            };
            return p;
          }};
}

OpRow rmsnorm() {
  constexpr float kEps = 1e-6f;
  // offset: the weight's, 0 for Llama's x * rstd * w, 1 for Gemma's x * rstd * (1 + w).
  auto dims = [](int B, int T, int C, int offset) { return Dims{{"B", B}, {"T", T}, {"C", C}, {"offset", offset}}; };
  return {"rmsnorm",
          {dims(1, 1, 1, 0), dims(2, 3, 5, 0), dims(1, 13, 37, 0), dims(3, 5, 24, 0), dims(2, 7, 200, 0),
           dims(1, 1, 1, 1), dims(2, 3, 5, 1), dims(3, 5, 24, 1), dims(2, 7, 200, 1)},
          [=](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int B = d["B"], T = d["T"], C = d["C"], N = B * T;
            const float offset = static_cast<float>(d["offset"]);
            DVec x = normal(gen, size_t(N) * C, 2.0);
            for (int c = 0; c < C; ++c) x[size_t(c)] *= 0.0005;  // row 0: mean square ~ eps, so that eps matters
            Problem p;
            p.in = {input("x", {B, T, C}, ty.dt, x, true), input("weight", {C}, ty.dt, normal(gen, size_t(C)), true)};
            p.out = {output("out", {B, T, C}, ty.dt, gen), output("rstd", {N}, DType::f32, gen, false)};
            p.reference = [=](const Ins& in) {
              Outs o{DVec(size_t(N) * C), DVec(size_t(N))};
              ref::rmsnorm_forward(o[0].data(), o[1].data(), in[0].data(), in[1].data(), N, C, kEps, offset);
              return o;
            };
            p.forward = [=](const Backend& be, Call& c) {
              be.rmsnorm_forward(c.out[0], c.out[1], c.in[0], c.in[1], kEps, offset);
            };
            p.backward = [=](const Backend& be, Call& c) {
              be.rmsnorm_backward(c.grad[0], c.grad[1], c.dout[0], c.in[0], c.in[1], c.out[1], offset);
            };
            return p;
          }};
}

OpRow matmul() {
  auto dims = [](int B, int T, int C, int OC, int bias) {
    return Dims{{"B", B}, {"T", T}, {"C", C}, {"OC", OC}, {"bias", bias}};
  };
  return {"matmul",
          {dims(1, 1, 1, 1, 1), dims(1, 1, 7, 3, 0), dims(2, 7, 13, 10, 1), dims(2, 7, 13, 10, 0),
           dims(1, 5, 24, 40, 1), dims(3, 5, 16, 24, 0), dims(3, 11, 96, 136, 1)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int B = d["B"], T = d["T"], C = d["C"], OC = d["OC"], N = B * T;
            const bool bias = d["bias"];
            Problem p;
            p.in = {input("x", {B, T, C}, ty.dt, normal(gen, size_t(N) * C), true),
                    input("weight", {OC, C}, ty.dt, normal(gen, size_t(OC) * C), true)};
            if (bias) p.in.push_back(input("bias", {OC}, ty.dt, normal(gen, size_t(OC)), true));
            p.out = {output("out", {B, T, OC}, ty.dt, gen)};
            p.reference = [=](const Ins& in) {
              DVec out(size_t(N) * OC);
              ref::matmul_forward(out.data(), in[0].data(), in[1].data(), bias ? in[2].data() : nullptr, N, C, OC);
              return Outs{out};
            };
            const int ib = bias ? 2 : -1;
            p.forward = [=](const Backend& be, Call& c) {
              be.matmul_forward(c.out[0], c.in[0], c.in[1], at(c.in, ib));
            };
            p.backward = [=](const Backend& be, Call& c) {
              be.matmul_backward(c.grad[0], c.grad[1], at(c.grad, ib), c.dout[0], c.in[0], c.in[1]);
            };
            return p;
          },
          {},
          // kernels/cuda/kernels.hpp: bf16 GEMMs take C and OC in multiples of 8.
          [](const Backend& be, const Dims& d, const Types& ty) {
            return !on_cuda(be) || ty.dt != DType::bf16 || (d["C"] % 8 == 0 && d["OC"] % 8 == 0);
          }};
}

OpRow attention() {
  // NKV = NH: GPT-2's multi-head attention, (B,T,3C); NKV < NH: grouped-query heads. qpas, when not
  // 0, scales the scores by qpas^-0.5 (Gemma's query_pre_attn_scalar) instead of hs^-0.5; window,
  // when not 0, is a sliding window (kernels/attention_options.hpp): smaller than T across the
  // CUDA kernels' 32- and 64-row tiles, 1 (each query itself only), T and more (plain causal).
  auto dims = [](int B, int T, int C, int NH, int NKV, int qpas = 0, int window = 0) {
    return Dims{{"B", B}, {"T", T}, {"C", C}, {"NH", NH}, {"NKV", NKV}, {"qpas", qpas}, {"window", window}};
  };
  return {"attention",
          {dims(1, 1, 3, 1, 1), dims(2, 7, 12, 3, 3), dims(1, 13, 30, 5, 5), dims(1, 1, 8, 1, 1), dims(2, 7, 48, 3, 3),
           dims(3, 5, 40, 5, 5), dims(1, 17, 128, 2, 2), dims(1, 9, 128, 1, 1), dims(2, 131, 32, 2, 2),
           dims(2, 7, 48, 6, 2), dims(1, 70, 64, 4, 1),
           dims(1, 13, 30, 5, 5, 0, 4), dims(2, 131, 32, 2, 2, 0, 40), dims(1, 70, 64, 4, 1, 0, 5),
           dims(1, 70, 64, 4, 2, 0, 1), dims(1, 100, 128, 1, 1, 0, 40), dims(2, 7, 48, 3, 3, 0, 7),
           dims(2, 7, 48, 6, 2, 0, 100), dims(1, 17, 128, 2, 2, 256, 0), dims(1, 131, 64, 2, 1, 100, 33)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int B = d["B"], T = d["T"], C = d["C"], NH = d["NH"], NKV = d["NKV"], hs = C / NH;
            const int width = (NH + 2 * NKV) * hs;
            const AttentionOptions opt = attention_options(d);
            Problem p;
            p.in = {input("qkv", {B, T, width}, ty.dt, normal(gen, size_t(B) * T * width), true)};
            p.out = {output("out", {B, T, C}, ty.dt, gen)};
            p.reference = [=](const Ins& in) {
              DVec out(size_t(B) * T * C);
              ref::attention_forward<double>(out.data(), nullptr, in[0].data(), B, T, NH, NKV, hs, opt.scale,
                                             opt.window);
              return Outs{out};
            };
            p.forward = [=](const Backend& be, Call& c) {
              c.saved = be.attention_forward(c.out[0], c.in[0], NH, NKV, AttentionKernel::own, opt);
            };
            p.backward = [=](const Backend& be, Call& c) {
              be.attention_backward(c.grad[0], c.dout[0], c.in[0], c.out[0], c.saved, NH, NKV, AttentionKernel::own,
                                    opt);
            };
            return p;
          },
          {},
          // kernels/cuda/kernels.hpp: head sizes are multiples of 8 up to 128.
          [](const Backend& be, const Dims& d, const Types&) {
            const int hs = d["C"] / d["NH"];
            return !on_cuda(be) || (hs % 8 == 0 && hs <= 128);
          }};
}

OpRow gelu() {
  // 16384 + 37 crosses the CPU kernel's chunk; 4099 the CUDA kernels' packs with a tail.
  return {"gelu",
          {Dims{{"n", 1}}, Dims{{"n", 7}}, Dims{{"n", 37}}, Dims{{"n", 4099}}, Dims{{"n", 16384 + 37}}},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int n = d["n"];
            Problem p;
            p.in = {input("x", {n}, ty.dt, normal(gen, size_t(n), 2.0), true)};
            p.out = {output("out", {n}, ty.dt, gen)};
            p.reference = [=](const Ins& in) {
              DVec out(static_cast<size_t>(n));
              ref::gelu_forward(out.data(), in[0].data(), size_t(n));
              return Outs{out};
            };
            p.forward = [](const Backend& be, Call& c) { be.gelu_forward(c.out[0], c.in[0]); };
            p.backward = [](const Backend& be, Call& c) { be.gelu_backward(c.grad[0], c.in[0], c.dout[0]); };
            return p;
          }};
}

// A gated linear unit: x (B,T,2F) holding [gate | up] -> (B,T,F) = act(gate) * up.
OpRow glu(const char* name, void (*reference)(double*, const double*, int, int),
          void (Backend::*forward)(const Tensor&, const Tensor&) const,
          void (Backend::*backward)(const Tensor&, const Tensor&, const Tensor&) const) {
  auto dims = [](int B, int T, int F) { return Dims{{"B", B}, {"T", T}, {"F", F}}; };
  return {name,
          {dims(1, 1, 1), dims(2, 3, 7), dims(1, 5, 64), dims(3, 7, 37)},
          [=](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int B = d["B"], T = d["T"], F = d["F"], N = B * T;
            Problem p;
            p.in = {input("x", {B, T, 2 * F}, ty.dt, normal(gen, size_t(N) * 2 * F, 2.0), true)};
            p.out = {output("out", {B, T, F}, ty.dt, gen)};
            p.reference = [=](const Ins& in) {
              DVec out(size_t(N) * F);
              reference(out.data(), in[0].data(), N, F);
              return Outs{out};
            };
            p.forward = [=](const Backend& be, Call& c) { (be.*forward)(c.out[0], c.in[0]); };
            p.backward = [=](const Backend& be, Call& c) { (be.*backward)(c.grad[0], c.in[0], c.dout[0]); };
            return p;
          }};
}

OpRow swiglu() {
  return glu("swiglu", ref::swiglu_forward<double>, &Backend::swiglu_forward, &Backend::swiglu_backward);
}

OpRow geglu() { return glu("geglu", ref::geglu_forward<double>, &Backend::geglu_forward, &Backend::geglu_backward); }

OpRow rope() {
  auto dims = [](int B, int T, int NH, int NKV, int hs) {
    return Dims{{"B", B}, {"T", T}, {"NH", NH}, {"NKV", NKV}, {"hs", hs}};
  };
  return {"rope",
          {dims(1, 1, 1, 1, 2), dims(2, 5, 2, 2, 4), dims(1, 7, 6, 2, 8), dims(2, 3, 3, 1, 6), dims(1, 131, 4, 2, 16)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int B = d["B"], T = d["T"], NH = d["NH"], NKV = d["NKV"], hs = d["hs"];
            const size_t n = size_t(B) * T * (NH + 2 * NKV) * hs;
            std::vector<float> inv_freq(size_t(hs / 2));
            for (int i = 0; i < hs / 2; ++i) inv_freq[size_t(i)] = 1.0f / std::pow(10000.0f, 2.0f * float(i) / float(hs));
            Problem p;
            p.in = {input("qkv", {B, T, (NH + 2 * NKV) * hs}, ty.dt, normal(gen, n), true),
                    input("inv_freq", {hs / 2}, DType::f32, DVec(inv_freq.begin(), inv_freq.end()))};
            p.out = {output("out", {B, T, (NH + 2 * NKV) * hs}, ty.dt, gen)};
            p.reference = [=](const Ins& in) {
              DVec out(n);
              ref::rope_forward(out.data(), in[0].data(), inv_freq.data(), B, T, NH, NKV, hs);
              return Outs{out};
            };
            p.forward = [=](const Backend& be, Call& c) { be.rope_forward(c.out[0], c.in[0], c.in[1], NH, NKV); };
            p.backward = [=](const Backend& be, Call& c) { be.rope_backward(c.grad[0], c.dout[0], c.in[1], NH, NKV); };
            return p;
          }};
}

OpRow residual() {
  return {"residual",
          {Dims{{"n", 1}}, Dims{{"n", 13}}, Dims{{"n", 16384 + 37}}},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int n = d["n"];
            Problem p;
            p.in = {input("a", {n}, ty.dt, normal(gen, size_t(n)), true),
                    input("b", {n}, ty.dt, normal(gen, size_t(n)), true)};
            p.out = {output("out", {n}, ty.dt, gen)};
            p.reference = [=](const Ins& in) {
              DVec out(static_cast<size_t>(n));
              ref::residual_forward(out.data(), in[0].data(), in[1].data(), size_t(n));
              return Outs{out};
            };
            p.forward = [](const Backend& be, Call& c) { be.residual_forward(c.out[0], c.in[0], c.in[1]); };
            p.backward = [](const Backend& be, Call& c) { be.residual_backward(c.grad[0], c.grad[1], c.dout[0]); };
            return p;
          }};
}

OpRow add_columns() {
  auto dims = [](int N, int OC, int c0, int n) { return Dims{{"N", N}, {"OC", OC}, {"c0", c0}, {"n", n}}; };
  return {"add_columns",
          {dims(1, 1, 0, 1), dims(3, 7, 2, 3), dims(5, 12, 8, 4), dims(17, 96, 0, 96), dims(33, 80, 48, 16)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int N = d["N"], OC = d["OC"], c0 = d["c0"], n = d["n"];
            constexpr float kScale = 0.75f;
            Problem p;
            p.in = {input("y", {N, OC}, ty.dt, normal(gen, size_t(N) * OC), true),
                    input("d", {N, n}, ty.dt, normal(gen, size_t(N) * n), true)};
            p.out = {output("out", {N, OC}, ty.dt, gen)};
            p.reference = [=](const Ins& in) {
              DVec out(in[0].begin(), in[0].end());
              for (int i = 0; i < N; ++i)
                for (int j = 0; j < n; ++j) out[size_t(i) * OC + c0 + j] += double{kScale} * in[1][size_t(i) * n + j];
              return Outs{out};
            };
            p.forward = [=](const Backend& be, Call& c) { be.add_columns_forward(c.out[0], c.in[0], c.in[1], c0, kScale); };
            p.backward = [=](const Backend& be, Call& c) {
              be.add_columns_backward(c.grad[0], c.grad[1], c.dout[0], c0, kScale);
            };
            return p;
          }};
}

OpRow dropout() {
  // p 0.3 (and 0.9: most dropped); the reference draws the mask from the same (seed, element) rule.
  auto dims = [](int n, int p10) { return Dims{{"n", n}, {"p10", p10}}; };
  return {"dropout",
          {dims(1, 3), dims(13, 3), dims(16384 + 37, 3), dims(4099, 9)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int n = d["n"];
            const DropoutMask mask = dropout_mask(static_cast<float>(d["p10"]) / 10.0f, 0x5eed + uint64_t(n));
            Problem p;
            p.in = {input("x", {n}, ty.dt, normal(gen, size_t(n)), true)};
            p.out = {output("out", {n}, ty.dt, gen)};
            p.reference = [=](const Ins& in) {
              DVec out(static_cast<size_t>(n));
              for (int i = 0; i < n; ++i) out[size_t(i)] = dropout_keeps(mask, uint64_t(i)) ? in[0][size_t(i)] * mask.scale : 0.0;
              return Outs{out};
            };
            p.forward = [=](const Backend& be, Call& c) { be.dropout_forward(c.out[0], c.in[0], mask); };
            p.backward = [=](const Backend& be, Call& c) { be.dropout_backward(c.grad[0], c.dout[0], mask); };
            return p;
          }};
}

OpRow crossentropy() {
  // The logits (N,Vp) come as K column ranges; every `ignore`-th row's target is ignore_index
  // (1: every row, 0: none). The padded columns [V,Vp) hold logits 30 above the rest, which
  // would dominate the softmax if any kernel took them in.
  constexpr int kIgnore = -100;
  auto dims = [](int B, int T, int V, int Vp, int K, int ignore) {
    return Dims{{"B", B}, {"T", T}, {"V", V}, {"Vp", Vp}, {"K", K}, {"ignore", ignore}};
  };
  return {"crossentropy",
          {dims(1, 1, 1, 8, 1, 0), dims(1, 1, 5, 5, 1, 0), dims(2, 3, 5, 8, 1, 2), dims(3, 7, 13, 13, 1, 3),
           dims(1, 13, 10, 16, 4, 3),  // part 2 partly padding, part 3 all padding
           dims(2, 5, 37, 40, 2, 4), dims(1, 4, 6, 8, 2, 1)},
          [=](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int B = d["B"], T = d["T"], V = d["V"], Vp = d["Vp"], K = d["K"], ignore = d["ignore"];
            const int N = B * T, R = Vp / K;
            DVec logits = normal(gen, size_t(N) * Vp, 2.0), targets = ids(gen, size_t(N), V);
            int counted = N;
            for (int i = 0; i < N; ++i) {
              for (int j = V; j < Vp; ++j) logits[size_t(i) * Vp + j] += 30.0;
              if (ignore > 0 && i % ignore == ignore - 1) targets[size_t(i)] = kIgnore, --counted;
            }
            const float scale = 0.7f / float(std::max(counted, 1));  // d(mean loss)/d(loss), times an upstream 0.7
            Problem p;
            p.overwrites = true;
            for (int k = 0; k < K; ++k) {
              DVec part(size_t(N) * R);
              for (int i = 0; i < N; ++i)
                std::copy_n(logits.begin() + long(i) * Vp + long(k) * R, R, part.begin() + long(i) * R);
              p.in.push_back(input("logits", {B, T, R}, ty.dt, part, true));
              p.in.back().name += std::to_string(k);
              p.in.back().exact_zeros = true;  // padded columns and ignored rows
            }
            p.in.push_back(input("targets", {B, T}, DType::i32, targets));
            p.out = {Out{"losses", {N}, DType::f32, DVec(size_t(N), scale)},
                     output("lse", {N}, DType::f32, gen, false)};
            p.out[0].exact_zeros = true;  // ignored rows
            p.reference = [=](const Ins& in) {
              DVec whole(size_t(N) * Vp), losses(static_cast<size_t>(N)), lse(static_cast<size_t>(N));
              for (int k = 0; k < K; ++k)
                for (int i = 0; i < N; ++i)
                  std::copy_n(in[size_t(k)].begin() + long(i) * R, R, whole.begin() + long(i) * Vp + long(k) * R);
              int count = 0;
              ref::crossentropy_forward(losses.data(), lse.data(), &count, whole.data(), as_ids(in[size_t(K)]).data(),
                                        N, V, Vp, kIgnore);
              return Outs{losses, lse};
            };
            p.forward = [=](const Backend& be, Call& c) {
              be.crossentropy_forward(c.out[0], c.out[1], {c.in.begin(), c.in.begin() + K}, c.in[size_t(K)], V,
                                      kIgnore);
            };
            p.backward = [=](const Backend& be, Call& c) {
              be.crossentropy_backward({c.grad.begin(), c.grad.begin() + K}, c.out[1], c.in[size_t(K)], scale, V,
                                       kIgnore);
            };
            return p;
          },
          {},
          // kernels/cuda/backend.cpp: the CUDA kernel takes the logits as one part.
          [](const Backend& be, const Dims& d, const Types&) { return !on_cuda(be) || d["K"] == 1; }};
}

}  // namespace

AttentionOptions attention_options(const Dims& d) {
  AttentionOptions opt;
  if (d["qpas"]) opt.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d["qpas"])));
  opt.window = d["window"];
  return opt;
}

// Rows of the flat-buffer ops (cast, accumulate, sum_squares, any_nonfinite, adamw_update).
std::vector<OpRow> flat_buffer_rows();

const std::vector<OpRow>& op_rows() {
  static const std::vector<OpRow> rows = [] {
    std::vector<OpRow> r{encoder(), layernorm(), rmsnorm(), matmul(), attention(), gelu(), swiglu(), geglu(), rope(),
                         residual(), add_columns(), dropout(), crossentropy()};
    for (OpRow& f : flat_buffer_rows()) r.push_back(std::move(f));
    return r;
  }();
  return rows;
}

}  // namespace zt::sweep
