// The sweep's rows for the flat-buffer ops of zt::Backend (the ZeRO engine's shards): cast,
// accumulate, sum_squares, any_nonfinite, adamw_update. None has a backward; see
// tests/backend_ops_rows.cpp for the model's ops.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "tests/backend_ops.hpp"
#include "tests/reference.hpp"

namespace zt::sweep {

namespace {

using Ins = std::vector<DVec>;
using Outs = std::vector<DVec>;

DVec normal(std::mt19937& gen, size_t n, double sd = 1.0) {
  std::normal_distribution<double> d(0.0, sd);
  DVec v(n);
  for (double& x : v) x = d(gen);
  return v;
}

// x rounded to nearest even in dtype t, from the formats' definitions (not zt's conversions).
double reference_round(DType t, double x) {
  if (t == DType::bf16) return ref::bf16_value(ref::bf16_from(x));
  if (t == DType::f16) return ref::f16_value(ref::f16_from(x));
  return x;
}

// Each nonzero size in d[names] is one tensor of dtype dt, named by its size's name.
std::vector<In> tensors(const Dims& d, std::initializer_list<const char*> names, DType dt, std::mt19937& gen) {
  std::vector<In> in;
  for (const char* n : names)
    if (d[n] > 0) in.push_back(In{n, {d[n]}, dt, normal(gen, size_t(d[n]))});
  return in;
}

OpRow cast() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // The rounding edges first: zeros, infinities, bf16 ties, f16's overflow threshold and
  // subnormals, an f32 subnormal, FLT_MAX; then values spread over f16's range and beyond.
  static const double kEdges[] = {0.0,           -0.0,         kInf,     -kInf,    1 + 0x1p-8,  1 + 3 * 0x1p-8,
                                  -1 - 0x1p-8,   65504.0,      65519.0,  65520.0,  -70000.0,    0x1p-24,
                                  0x1p-25,       3 * 0x1p-25,  0x1p-14 - 0x1p-25,  0x1p-149,    0x1.fffffep127};
  auto types = [](const Backend&) {
    std::vector<Types> ts;
    for (DType from : {DType::f32, DType::bf16, DType::f16})
      for (DType to : {DType::f32, DType::bf16, DType::f16}) ts.push_back({from, to});
    return ts;
  };
  return {"cast",
          {Dims{{"n", 1}}, Dims{{"n", 7}}, Dims{{"n", 4099}}},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int n = d["n"];
            DVec x = normal(gen, size_t(n));
            std::uniform_real_distribution<double> e(-30.0, 20.0);
            for (double& v : x) v *= std::exp2(e(gen));
            for (size_t i = 0; i < std::size(kEdges) && i < x.size(); ++i) x[i] = kEdges[i];
            Problem p;
            p.in = {In{"in", {n}, ty.dt, x}};
            p.out = {Out{"out", {n}, ty.to}};
            p.out[0].exact = true;  // rounding is exact: bit for bit, the sign of zero included
            p.reference = [to = ty.to](const Ins& in) {
              DVec out = in[0];
              for (double& v : out) v = reference_round(to, v);
              return Outs{out};
            };
            p.forward = [](const Backend& be, Call& c) { be.cast(c.out[0], c.in[0]); };
            return p;
          },
          types,
          // kernels/cpu/kernels.hpp, kernels/cuda/kernels.hpp: no bf16 <-> f16.
          [](const Backend&, const Dims&, const Types& ty) {
            return ty.dt == ty.to || ty.dt == DType::f32 || ty.to == DType::f32;
          },
          true};
}

OpRow accumulate() {
  return {"accumulate",
          {Dims{{"n", 1}}, Dims{{"n", 7}}, Dims{{"n", 16384 + 37}}},
          [](const Dims& d, const Types&, std::mt19937& gen) {
            const int n = d["n"];
            Problem p;
            p.in = {In{"dst", {n}, DType::f32, normal(gen, size_t(n))},
                    In{"src", {n}, DType::f32, normal(gen, size_t(n))}};
            p.out = {Out{"dst", {n}, DType::f32}};
            p.out[0].alias = 0;
            p.reference = [=](const Ins& in) {
              DVec out(static_cast<size_t>(n));
              ref::residual_forward(out.data(), in[0].data(), in[1].data(), size_t(n));
              return Outs{out};
            };
            p.forward = [](const Backend& be, Call& c) { be.accumulate(c.in[0], c.in[1]); };
            return p;
          },
          [](const Backend&) { return std::vector<Types>{{DType::f32, DType::f32}}; }};  // f32 only, backend.hpp
}

OpRow sum_squares() {
  auto dims = [](int a, int b, int c) { return Dims{{"a", a}, {"b", b}, {"c", c}}; };
  return {"sum_squares",
          {dims(0, 0, 0), dims(1, 0, 0), dims(37, 0, 0), dims(7, 1, 4101), dims(300007, 5, 0)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            Problem p;
            p.in = tensors(d, {"a", "b", "c"}, ty.dt, gen);
            p.out = {Out{"sum", {1}, DType::f32}};
            p.out[0].host = true;
            p.reference = [](const Ins& in) {
              double s = 0;
              for (const DVec& x : in) s += ref::sum_squares(x.data(), x.size());
              return Outs{{s}};
            };
            p.forward = [](const Backend& be, Call& c) { c.host = be.sum_squares(c.in); };
            return p;
          }};
}

OpRow any_nonfinite() {
  // One bad value of kind `bad` (0 none, 1 inf, 2 -inf, 3 NaN) at element `at` of tensor `in`.
  auto dims = [](int a, int b, int in, int at, int bad) {
    return Dims{{"a", a}, {"b", b}, {"in", in}, {"at", at}, {"bad", bad}};
  };
  return {"any_nonfinite",
          {dims(0, 0, 0, 0, 0), dims(1, 0, 0, 0, 0), dims(37, 5, 0, 0, 3), dims(37, 5, 1, 4, 1),
           dims(4099, 0, 0, 2048, 2), dims(16384 + 37, 3, 0, 16384 + 36, 3), dims(16384 + 37, 3, 0, 0, 0)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            constexpr double kBad[] = {0, std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity(),
                                       std::numeric_limits<double>::quiet_NaN()};
            Problem p;
            p.in = tensors(d, {"a", "b"}, ty.dt, gen);
            if (d["bad"]) p.in.at(size_t(d["in"])).v.at(size_t(d["at"])) = kBad[d["bad"]];
            p.out = {Out{"any", {1}, DType::f32}};
            p.out[0].host = p.out[0].exact = true;
            p.reference = [](const Ins& in) {
              double any = 0;
              for (const DVec& x : in)
                for (double v : x) any = !std::isfinite(v) ? 1.0 : any;
              return Outs{{any}};
            };
            p.forward = [](const Backend& be, Call& c) { c.host = be.any_nonfinite(c.in) ? 1.0 : 0.0; };
            return p;
          }};
}

OpRow adamw_update() {
  // Types: dt the gradients' dtype, `to` the low-precision copy's (f32: none). lr is large so
  // that the update stands well above f32's rounding of the master weights; every 7th element
  // has a tiny gradient and no history, so that sqrt(v) ~ eps and where eps goes matters.
  auto types = [](const Backend& be) {
    std::vector<Types> ts;
    for (DType g : {DType::f32, DType::bf16, DType::f16})
      if (be.computes_in(g))
        for (DType low : {DType::f32, DType::bf16, DType::f16}) ts.push_back({g, low});
    return ts;
  };
  auto dims = [](int n, int t) { return Dims{{"n", n}, {"t", t}}; };
  return {"adamw_update",
          {dims(1, 1), dims(7, 2), dims(1013, 5), dims(4099, 1)},
          [](const Dims& d, const Types& ty, std::mt19937& gen) {
            const int n = d["n"];
            const AdamWArgs a{0.05f, 0.9f, 0.95f, 1e-8f, 0.1f, d["t"], 0.37f};
            DVec grads = normal(gen, size_t(n), 3.0), m = normal(gen, size_t(n), 0.1), v = normal(gen, size_t(n), 0.1);
            for (size_t i = 0; i < size_t(n); ++i) {
              v[i] *= v[i];
              if (i % 7 == 6) grads[i] *= 1e-8, m[i] = v[i] = 0.0;
            }
            const bool low = ty.to != DType::f32;
            Problem p;
            p.in = {In{"master", {n}, DType::f32, normal(gen, size_t(n))}, In{"grads", {n}, ty.dt, grads},
                    In{"m", {n}, DType::f32, m}, In{"v", {n}, DType::f32, v}};
            p.out = {Out{"master", {n}, DType::f32}, Out{"m", {n}, DType::f32}, Out{"v", {n}, DType::f32}};
            p.out[0].alias = 0, p.out[1].alias = 2, p.out[2].alias = 3;
            if (low) p.out.push_back(Out{"low", {n}, ty.to});
            p.reference = [=, to = ty.to](const Ins& in) {
              Outs o{in[0], in[2], in[3]};
              // The float hyperparameters as doubles, so that both sides use the same numbers.
              ref::adamw_step<double>(o[0].data(), in[1].data(), o[1].data(), o[2].data(), size_t(n), a.lr, a.beta1,
                                      a.beta2, a.eps, a.weight_decay, a.t, a.grad_scale);
              if (low) {
                o.push_back(o[0]);
                for (double& x : o.back()) x = reference_round(to, x);
              }
              return o;
            };
            p.forward = [=](const Backend& be, Call& c) {
              be.adamw_update(c.in[0], low ? c.out[3] : Tensor(), c.in[1], c.in[2], c.in[3], a);
            };
            return p;
          },
          types};
}

}  // namespace

std::vector<OpRow> flat_buffer_rows() { return {cast(), accumulate(), sum_squares(), any_nonfinite(), adamw_update()}; }

}  // namespace zt::sweep
