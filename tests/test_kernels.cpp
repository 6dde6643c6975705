// The CPU kernels against the double references in tests/reference.hpp. Forwards are compared
// directly, on outputs poisoned with NaN beforehand so that an unwritten element fails. Backwards
// are compared with central finite differences of the reference for L = sum(out * W), W random
// (so dout = W); gradient buffers start at a random G0, and kernel_grad - G0 is what is compared,
// which checks that backwards accumulate. Sizes are small, odd and not powers of two. GELU is
// checked only by the backend-op sweep (tests/test_backend_ops.cpp), which does the same and more.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.hpp"
#include "tensor/dtype.hpp"
#include "tests/reference.hpp"

namespace cpu = zt::cpu;
namespace ref = zt::ref;

namespace {

using Vec = std::vector<float>;
using DVec = std::vector<double>;
using Ids = std::vector<int32_t>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kFwdTol = 1e-5;   // ||kernel - ref|| / ||ref||, forwards
constexpr double kGradTol = 1e-4;  // the same for gradients against finite differences
constexpr double kH = 1e-5;        // finite-difference step, on doubles of size ~1
constexpr double kSameTol = 1e-6;  // a gradient computed with another one skipped (null) vs. with it

Vec normal(std::mt19937& gen, size_t n, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  Vec v(n);
  for (float& x : v) x = d(gen);
  return v;
}

Ids ids(std::mt19937& gen, size_t n, int hi) {  // uniform in [0, hi)
  std::uniform_int_distribution<int32_t> d(0, hi - 1);
  Ids v(n);
  for (int32_t& x : v) x = d(gen);
  return v;
}

DVec dbl(const Vec& v) { return DVec(v.begin(), v.end()); }
Vec poison(size_t n) { return Vec(n, kNaN); }

double dot(const DVec& a, const DVec& b) { return std::inner_product(a.begin(), a.end(), b.begin(), 0.0); }

bool all_finite(const Vec& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

bool same_bits(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ||got - want|| / ||want||; NaN if got holds a NaN, so that `<= tol` fails.
double rel_err(const Vec& got, const DVec& want) {
  REQUIRE(got.size() == want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

void check_close(const std::string& what, const Vec& got, const DVec& want, double tol = kFwdTol) {
  INFO(what);
  CHECK(all_finite(got));
  CHECK(rel_err(got, want) <= tol);
}

// One input's gradient. `loss` evaluates the reference L from the double inputs, x among them;
// x is perturbed in place by +-kH and restored. grad is the kernel's buffer after backward and g0
// what it held before (empty: zero, for overwriting backwards). samples > 0: difference only that
// many random elements (big inputs).
void check_grad(const std::string& what, DVec& x, const std::function<double()>& loss, const Vec& grad, const Vec& g0,
                size_t samples = 0) {
  REQUIRE(grad.size() == x.size());
  std::vector<size_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  if (samples && samples < x.size()) {
    std::mt19937 gen(1234);
    std::uniform_int_distribution<size_t> d(0, x.size() - 1);
    idx.resize(samples);
    for (size_t& i : idx) i = d(gen);
  }
  double num = 0, den = 0;
  for (size_t i : idx) {
    const double xi = x[i];
    x[i] = xi + kH;
    const double lp = loss();
    x[i] = xi - kH;
    const double lm = loss();
    x[i] = xi;
    const double fd = (lp - lm) / (2 * kH);
    const double got = static_cast<double>(grad[i]) - (g0.empty() ? 0.0 : static_cast<double>(g0[i]));
    num += (got - fd) * (got - fd);
    den += fd * fd;
  }
  INFO("gradient of ", what);
  CHECK(all_finite(grad));
  CHECK(std::sqrt(num / den) <= kGradTol);
}

}  // namespace

// ------------------------------------------------------------------------------------------------

TEST_CASE("encoder") {
  struct Dims { int B, T, C, Vp; };
  for (Dims d : {Dims{2, 7, 12, 11}, Dims{3, 5, 70, 9}}) {  // C = 70: two of the backward's 64-column strips
    CAPTURE(d.B); CAPTURE(d.T); CAPTURE(d.C);
    const int maxT = d.T + 3;  // wpe rows past T must get no gradient
    const size_t n = static_cast<size_t>(d.B) * d.T * d.C;
    std::mt19937 gen(1);
    const Ids inp = ids(gen, static_cast<size_t>(d.B) * d.T, d.Vp);  // Vp < B*T: tokens repeat
    const Vec wte = normal(gen, static_cast<size_t>(d.Vp) * d.C), wpe = normal(gen, static_cast<size_t>(maxT) * d.C);
    const Vec W = normal(gen, n), g0_wte = normal(gen, wte.size()), g0_wpe = normal(gen, wpe.size());
    DVec dwte = dbl(wte), dwpe = dbl(wpe), dW = dbl(W), ref_out(n);
    auto loss = [&] {
      ref::encoder_forward(ref_out.data(), inp.data(), dwte.data(), dwpe.data(), d.B, d.T, d.C);
      return dot(ref_out, dW);
    };

    Vec out = poison(n);
    cpu::encoder_forward(out.data(), inp.data(), wte.data(), wpe.data(), d.B, d.T, d.C, 0, d.Vp);
    loss();
    check_close("encoder out", out, ref_out);

    Vec gwte = g0_wte, gwpe = g0_wpe;
    cpu::encoder_backward(gwte.data(), gwpe.data(), W.data(), inp.data(), d.B, d.T, d.C, 0, d.Vp);
    check_grad("wte", dwte, loss, gwte, g0_wte);
    check_grad("wpe", dwpe, loss, gwpe, g0_wpe);

    {  // null gradients are skipped
      Vec only_wte = g0_wte, only_wpe = g0_wpe;
      cpu::encoder_backward(only_wte.data(), nullptr, W.data(), inp.data(), d.B, d.T, d.C, 0, d.Vp);
      cpu::encoder_backward(nullptr, only_wpe.data(), W.data(), inp.data(), d.B, d.T, d.C, 0, d.Vp);
      check_close("wte alone", only_wte, dbl(gwte), kSameTol);
      check_close("wpe alone", only_wpe, dbl(gwpe), kSameTol);
    }
    {  // wte as two row ranges (the tied embedding's units): the parts add up to the whole, bit
       // for bit, and each range gets exactly its rows' gradients
      const int r0 = d.Vp / 2;
      const size_t split = static_cast<size_t>(r0) * d.C;
      Vec lo = poison(n), hi = poison(n);
      cpu::encoder_forward(lo.data(), inp.data(), wte.data(), wpe.data(), d.B, d.T, d.C, 0, r0);
      cpu::encoder_forward(hi.data(), inp.data(), wte.data() + split, nullptr, d.B, d.T, d.C, r0, d.Vp - r0);
      Vec sum(n);
      for (size_t i = 0; i < n; ++i) sum[i] = lo[i] + hi[i];
      CHECK(same_bits(sum, out));
      Vec g_lo(g0_wte.begin(), g0_wte.begin() + static_cast<std::ptrdiff_t>(split));
      Vec g_hi(g0_wte.begin() + static_cast<std::ptrdiff_t>(split), g0_wte.end());
      cpu::encoder_backward(g_lo.data(), nullptr, W.data(), inp.data(), d.B, d.T, d.C, 0, r0);
      cpu::encoder_backward(g_hi.data(), nullptr, W.data(), inp.data(), d.B, d.T, d.C, r0, d.Vp - r0);
      g_lo.insert(g_lo.end(), g_hi.begin(), g_hi.end());
      CHECK(same_bits(g_lo, gwte));
    }
  }
}

TEST_CASE("layernorm") {
  struct Dims { int N, C; };
  for (Dims d : {Dims{13, 12}, Dims{5, 37}, Dims{3, 200}}) {
    CAPTURE(d.N); CAPTURE(d.C);
    const size_t n = static_cast<size_t>(d.N) * d.C;
    std::mt19937 gen(2);
    Vec inp = normal(gen, n, 2.0f);
    for (size_t i = 0; i < n; ++i) inp[i] += static_cast<float>(i / d.C);  // a different mean per row
    for (int c = 0; c < d.C; ++c) inp[c] *= 0.002f;  // row 0: variance ~ eps, so that eps matters
    const Vec w = normal(gen, d.C), b = normal(gen, d.C), W = normal(gen, n);
    const Vec g0_inp = normal(gen, n), g0_w = normal(gen, d.C), g0_b = normal(gen, d.C);
    DVec dinp = dbl(inp), dw = dbl(w), db = dbl(b), dW = dbl(W), ref_out(n), ref_mean(d.N), ref_rstd(d.N);
    auto loss = [&] {
      ref::layernorm_forward(ref_out.data(), ref_mean.data(), ref_rstd.data(), dinp.data(), dw.data(), db.data(), d.N, d.C);
      return dot(ref_out, dW);
    };

    Vec out = poison(n), mean = poison(d.N), rstd = poison(d.N);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), d.N, d.C);
    loss();
    check_close("layernorm out", out, ref_out);
    check_close("layernorm mean", mean, ref_mean);
    check_close("layernorm rstd", rstd, ref_rstd);

    Vec ginp = g0_inp, gw = g0_w, gb = g0_b;
    cpu::layernorm_backward(ginp.data(), gw.data(), gb.data(), W.data(), inp.data(), w.data(), mean.data(), rstd.data(),
                            d.N, d.C);
    check_grad("inp", dinp, loss, ginp, g0_inp);
    check_grad("weight", dw, loss, gw, g0_w);
    check_grad("bias", db, loss, gb, g0_b);

    {  // null dinp is skipped
      Vec gw2 = g0_w, gb2 = g0_b;
      cpu::layernorm_backward(nullptr, gw2.data(), gb2.data(), W.data(), inp.data(), w.data(), mean.data(), rstd.data(),
                              d.N, d.C);
      check_close("weight without dinp", gw2, dbl(gw), kSameTol);
      check_close("bias without dinp", gb2, dbl(gb), kSameTol);
    }
  }
}

TEST_CASE("layernorm_backward is deterministic") {
  const int N = 1001, C = 96;
  std::mt19937 gen(3);
  const Vec inp = normal(gen, static_cast<size_t>(N) * C), w = normal(gen, C), b = normal(gen, C);
  const Vec dout = normal(gen, inp.size()), g0 = normal(gen, inp.size()), g0w = normal(gen, C), g0b = normal(gen, C);
  Vec out(inp.size()), mean(N), rstd(N);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
  Vec gi[2] = {g0, g0}, gw[2] = {g0w, g0w}, gb[2] = {g0b, g0b};
  for (int r = 0; r < 2; ++r)
    cpu::layernorm_backward(gi[r].data(), gw[r].data(), gb[r].data(), dout.data(), inp.data(), w.data(), mean.data(),
                            rstd.data(), N, C);
  CHECK(same_bits(gi[0], gi[1]));
  CHECK(same_bits(gw[0], gw[1]));
  CHECK(same_bits(gb[0], gb[1]));
}

TEST_CASE("matmul") {
  struct Dims { int N, C, OC; size_t samples; };
  for (Dims d : {Dims{13, 12, 10, 0}, Dims{1, 7, 3, 0}, Dims{67, 96, 130, 150}}) {
    CAPTURE(d.N); CAPTURE(d.C); CAPTURE(d.OC);
    const size_t no = static_cast<size_t>(d.N) * d.OC;
    std::mt19937 gen(4);
    const Vec inp = normal(gen, static_cast<size_t>(d.N) * d.C), w = normal(gen, static_cast<size_t>(d.OC) * d.C);
    const Vec bias = normal(gen, d.OC), W = normal(gen, no);
    const Vec g0_inp = normal(gen, inp.size()), g0_w = normal(gen, w.size()), g0_b = normal(gen, d.OC);
    DVec dinp = dbl(inp), dw = dbl(w), db = dbl(bias), dW = dbl(W), ref_out(no);
    auto loss = [&] {
      ref::matmul_forward(ref_out.data(), dinp.data(), dw.data(), db.data(), d.N, d.C, d.OC);
      return dot(ref_out, dW);
    };

    Vec out = poison(no);
    cpu::matmul_forward(out.data(), inp.data(), w.data(), bias.data(), d.N, d.C, d.OC);
    loss();
    check_close("matmul out", out, ref_out);

    Vec out_nb = poison(no);
    DVec ref_nb(no);
    cpu::matmul_forward(out_nb.data(), inp.data(), w.data(), nullptr, d.N, d.C, d.OC);
    ref::matmul_forward<double>(ref_nb.data(), dinp.data(), dw.data(), nullptr, d.N, d.C, d.OC);
    check_close("matmul out without bias", out_nb, ref_nb);

    Vec ginp = g0_inp, gw = g0_w, gb = g0_b;
    cpu::matmul_backward(ginp.data(), gw.data(), gb.data(), W.data(), inp.data(), w.data(), d.N, d.C, d.OC);
    check_grad("inp", dinp, loss, ginp, g0_inp, d.samples);
    check_grad("weight", dw, loss, gw, g0_w, d.samples);
    check_grad("bias", db, loss, gb, g0_b);

    {  // null dbias is skipped
      Vec ginp2 = g0_inp, gw2 = g0_w;
      cpu::matmul_backward(ginp2.data(), gw2.data(), nullptr, W.data(), inp.data(), w.data(), d.N, d.C, d.OC);
      check_close("inp without dbias", ginp2, dbl(ginp), kSameTol);
      check_close("weight without dbias", gw2, dbl(gw), kSameTol);
    }
    {  // null dinp is skipped
      Vec gw2 = g0_w, gb2 = g0_b;
      cpu::matmul_backward(nullptr, gw2.data(), gb2.data(), W.data(), inp.data(), w.data(), d.N, d.C, d.OC);
      check_close("weight without dinp", gw2, dbl(gw), kSameTol);
      check_close("bias without dinp", gb2, dbl(gb), kSameTol);
    }
  }
}

TEST_CASE("attention") {
  struct Dims { int B, T, NH, NKV, hs; size_t samples; };
  // T = 150 spans three of the CPU kernel's 64-row blocks, the last one ragged; NKV < NH groups
  // query heads over shared key/value heads (2 and 3 to a group), whose gradients add up.
  for (Dims d : {Dims{2, 7, 3, 3, 4, 0}, Dims{1, 13, 5, 5, 6, 0}, Dims{2, 37, 4, 4, 12, 200}, Dims{1, 150, 2, 2, 8, 300},
                 Dims{2, 9, 4, 2, 6, 0}, Dims{1, 70, 6, 2, 4, 300}}) {
    CAPTURE(d.B); CAPTURE(d.T); CAPTURE(d.NH); CAPTURE(d.NKV); CAPTURE(d.hs);
    const size_t rows = static_cast<size_t>(d.B) * d.T;
    const size_t n = rows * d.NH * d.hs, nqkv = rows * (d.NH + 2 * d.NKV) * d.hs;
    const size_t natt = static_cast<size_t>(d.B) * d.NH * d.T * d.T;
    std::mt19937 gen(5);
    const Vec qkv = normal(gen, nqkv), W = normal(gen, n), g0 = normal(gen, nqkv);
    DVec dqkv = dbl(qkv), dW = dbl(W), ref_out(n), ref_att(natt);
    auto loss = [&] {
      ref::attention_forward(ref_out.data(), ref_att.data(), dqkv.data(), d.B, d.T, d.NH, d.NKV, d.hs);
      return dot(ref_out, dW);
    };

    Vec out = poison(n), att = poison(natt);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), d.B, d.T, d.NH, d.NKV, d.hs, {});
    loss();
    check_close("attention out", out, ref_out);
    check_close("attention probabilities", att, ref_att);

    bool rows_sum_to_one = true, upper_zero = true;
    for (size_t r = 0; r < natt / d.T; ++r) {
      const int t = static_cast<int>(r % d.T);
      double sum = 0;
      for (int s = 0; s <= t; ++s) sum += att[r * d.T + s];
      rows_sum_to_one &= std::fabs(sum - 1) <= 1e-5;
      for (int s = t + 1; s < d.T; ++s) upper_zero &= att[r * d.T + s] == 0.0f;
    }
    CHECK(rows_sum_to_one);
    CHECK(upper_zero);

    Vec grad = g0;
    cpu::attention_backward(grad.data(), W.data(), qkv.data(), att.data(), d.B, d.T, d.NH, d.NKV, d.hs, {});
    check_grad("qkv", dqkv, loss, grad, g0, d.samples);
  }
}

TEST_CASE("rmsnorm") {
  struct Dims { int N, C; };
  constexpr float kEps = 1e-6f;
  for (Dims d : {Dims{13, 12}, Dims{5, 37}, Dims{3, 200}}) {
    CAPTURE(d.N); CAPTURE(d.C);
    const size_t n = static_cast<size_t>(d.N) * d.C;
    std::mt19937 gen(3);
    Vec inp = normal(gen, n, 2.0f);
    for (int c = 0; c < d.C; ++c) inp[c] *= 0.0005f;  // row 0: mean square ~ eps, so that eps matters
    const Vec w = normal(gen, d.C), W = normal(gen, n), g0_inp = normal(gen, n), g0_w = normal(gen, d.C);
    DVec dinp = dbl(inp), dw = dbl(w), dW = dbl(W), ref_out(n), ref_rstd(d.N);
    auto loss = [&] {
      ref::rmsnorm_forward(ref_out.data(), ref_rstd.data(), dinp.data(), dw.data(), d.N, d.C, kEps);
      return dot(ref_out, dW);
    };

    Vec out = poison(n), rstd = poison(d.N);
    cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), d.N, d.C, kEps, 0.0f);
    loss();
    check_close("rmsnorm out", out, ref_out);
    check_close("rmsnorm rstd", rstd, ref_rstd);

    Vec ginp = g0_inp, gw = g0_w;
    cpu::rmsnorm_backward(ginp.data(), gw.data(), W.data(), inp.data(), w.data(), rstd.data(), d.N, d.C, 0.0f);
    check_grad("inp", dinp, loss, ginp, g0_inp);
    check_grad("weight", dw, loss, gw, g0_w);

    {  // a null gradient is skipped, the other unchanged
      Vec gw2 = g0_w, ginp2 = g0_inp;
      cpu::rmsnorm_backward(nullptr, gw2.data(), W.data(), inp.data(), w.data(), rstd.data(), d.N, d.C, 0.0f);
      cpu::rmsnorm_backward(ginp2.data(), nullptr, W.data(), inp.data(), w.data(), rstd.data(), d.N, d.C, 0.0f);
      check_close("weight without dinp", gw2, dbl(gw), kSameTol);
      check_close("inp without dweight", ginp2, dbl(ginp), kSameTol);
    }
  }
}

TEST_CASE("swiglu") {
  for (int F : {1, 7, 100}) {
    const int N = 9;
    CAPTURE(F);
    const size_t n = static_cast<size_t>(N) * F;
    std::mt19937 gen(4);
    const Vec inp = normal(gen, 2 * n, 3.0f), W = normal(gen, n), g0 = normal(gen, 2 * n);
    DVec dinp = dbl(inp), dW = dbl(W), ref_out(n);
    auto loss = [&] {
      ref::swiglu_forward(ref_out.data(), dinp.data(), N, F);
      return dot(ref_out, dW);
    };
    Vec out = poison(n);
    cpu::swiglu_forward(out.data(), inp.data(), N, F);
    loss();
    check_close("swiglu out", out, ref_out);
    Vec grad = g0;
    cpu::swiglu_backward(grad.data(), inp.data(), W.data(), N, F);
    check_grad("gate and up", dinp, loss, grad, g0);
    cpu::swiglu_backward(nullptr, inp.data(), W.data(), N, F);  // skipped
  }
}

TEST_CASE("rope") {
  struct Dims { int B, T, NH, NKV, hs; };
  // GPT-2-like (NKV = NH), grouped-query (NKV < NH), and a long sequence whose angles reach
  // hundreds of radians.
  for (Dims d : {Dims{2, 5, 2, 2, 4}, Dims{1, 7, 6, 2, 8}, Dims{1, 300, 2, 1, 6}}) {
    CAPTURE(d.B); CAPTURE(d.T); CAPTURE(d.NH); CAPTURE(d.NKV); CAPTURE(d.hs);
    std::vector<float> inv_freq(static_cast<size_t>(d.hs / 2));
    for (int i = 0; i < d.hs / 2; ++i) inv_freq[i] = 1.0f / std::pow(10000.0f, 2.0f * i / d.hs);
    const size_t n = static_cast<size_t>(d.B) * d.T * (d.NH + 2 * d.NKV) * d.hs;
    std::mt19937 gen(6);
    const Vec inp = normal(gen, n), W = normal(gen, n), g0 = normal(gen, n);
    DVec dinp = dbl(inp), dW = dbl(W), ref_out(n);
    auto loss = [&] {
      ref::rope_forward(ref_out.data(), dinp.data(), inv_freq.data(), d.B, d.T, d.NH, d.NKV, d.hs);
      return dot(ref_out, dW);
    };
    Vec out = poison(n);
    cpu::rope_forward(out.data(), inp.data(), inv_freq.data(), d.B, d.T, d.NH, d.NKV, d.hs);
    loss();
    check_close("rope out", out, ref_out);
    Vec grad = g0;
    cpu::rope_backward(grad.data(), W.data(), inv_freq.data(), d.B, d.T, d.NH, d.NKV, d.hs);
    check_grad("qkv", dinp, loss, grad, g0, 400);
  }
  CHECK_THROWS_WITH_AS(cpu::rope_forward(nullptr, nullptr, nullptr, 1, 1, 1, 1, 5),
                       doctest::Contains("head size must be even"), std::invalid_argument);
}

TEST_CASE("residual") {
  const size_t n = 16384 + 45;
  std::mt19937 gen(7);
  const Vec a = normal(gen, n), b = normal(gen, n), W = normal(gen, n), g0a = normal(gen, n), g0b = normal(gen, n);
  DVec da = dbl(a), db = dbl(b), dW = dbl(W), ref_out(n);
  auto loss = [&] {
    ref::residual_forward(ref_out.data(), da.data(), db.data(), n);
    return dot(ref_out, dW);
  };
  Vec out = poison(n);
  cpu::residual_forward(out.data(), a.data(), b.data(), n);
  loss();
  check_close("residual out", out, ref_out);

  Vec ga = g0a, gb = g0b;
  cpu::residual_backward(ga.data(), gb.data(), W.data(), n);
  check_grad("a", da, loss, ga, g0a, 300);
  check_grad("b", db, loss, gb, g0b, 300);
  DVec want(n);  // dout is W exactly: the accumulation itself is exact up to one rounding
  for (size_t i = 0; i < n; ++i) want[i] = static_cast<double>(g0a[i]) + W[i];
  check_close("a, all elements", ga, want, 1e-7);

  SUBCASE("null gradients are skipped") {
    Vec only_a = g0a, only_b = g0b;
    cpu::residual_backward(only_a.data(), nullptr, W.data(), n);
    cpu::residual_backward(nullptr, only_b.data(), W.data(), n);
    CHECK(same_bits(only_a, ga));
    CHECK(same_bits(only_b, gb));
  }
}

TEST_CASE("crossentropy") {
  const int N = 13, V = 10, Vp = 16, ignore = -1;
  std::mt19937 gen(8);
  Vec logits = normal(gen, static_cast<size_t>(N) * Vp, 2.0f);
  for (int i = 0; i < N; ++i)
    for (int j = V; j < Vp; ++j) logits[static_cast<size_t>(i) * Vp + j] += 30.0f;  // would dominate if not ignored
  Ids targets = ids(gen, N, V);
  targets[2] = targets[5] = targets[11] = ignore;
  DVec dlogits = dbl(logits), ref_losses(N), ref_lse(N);
  int ref_count = 0;
  const double upstream = 0.7;  // dL/dloss, L = upstream * mean loss
  auto loss = [&] {
    return upstream * ref::crossentropy_forward(ref_losses.data(), ref_lse.data(), &ref_count, dlogits.data(),
                                                targets.data(), N, V, Vp, ignore);
  };
  const double ref_mean = loss() / upstream;

  Vec losses = poison(N), lse = poison(N);
  const float* whole[] = {logits.data()};
  const int count = cpu::crossentropy_forward(losses.data(), lse.data(), whole, 1, targets.data(), N, V, Vp, ignore);
  CHECK(count == N - 3);
  CHECK(count == ref_count);
  check_close("losses", losses, ref_losses);
  check_close("lse", lse, ref_lse);
  CHECK(losses[2] == 0.0f);
  CHECK(losses[5] == 0.0f);
  CHECK(losses[11] == 0.0f);
  double sum = 0;
  for (float l : losses) sum += l;
  CHECK(std::fabs(sum / count - ref_mean) <= kFwdTol * ref_mean);

  // The backward writes d(logits) over the logits: every element, including the padded columns.
  const float scale = static_cast<float>(upstream / count);
  Vec grad = logits;
  float* grad_whole[] = {grad.data()};
  cpu::crossentropy_backward(grad_whole, 1, lse.data(), targets.data(), scale, N, V, Vp, ignore);
  check_grad("logits", dlogits, loss, grad, {});
  bool padded_zero = true, ignored_zero = true;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < Vp; ++j) {
      const float g = grad[static_cast<size_t>(i) * Vp + j];
      if (j >= V) padded_zero &= g == 0.0f;
      if (targets[i] == ignore) ignored_zero &= g == 0.0f;
    }
  CHECK(padded_zero);
  CHECK(ignored_zero);

  SUBCASE("logits as column ranges") {
    // K = 4 parts of 4 columns: part 2 is partly padding, part 3 all padding (V = 10).
    const int K = 4, R = Vp / K;
    std::vector<Vec> parts(K, Vec(static_cast<size_t>(N) * R));
    for (int k = 0; k < K; ++k)
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < R; ++j)
          parts[k][static_cast<size_t>(i) * R + j] = logits[static_cast<size_t>(i) * Vp + k * R + j];
    std::vector<const float*> in;
    std::vector<float*> out;
    for (Vec& p : parts) {
      in.push_back(p.data());
      out.push_back(p.data());
    }
    Vec l4 = poison(N), lse4 = poison(N);
    CHECK(cpu::crossentropy_forward(l4.data(), lse4.data(), in.data(), K, targets.data(), N, V, Vp, ignore) == count);
    check_close("losses from parts", l4, dbl(losses), kSameTol);
    check_close("lse from parts", lse4, dbl(lse), kSameTol);
    cpu::crossentropy_backward(out.data(), K, lse.data(), targets.data(), scale, N, V, Vp, ignore);
    Vec joined(grad.size());
    for (int k = 0; k < K; ++k)
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < R; ++j)
          joined[static_cast<size_t>(i) * Vp + k * R + j] = parts[k][static_cast<size_t>(i) * R + j];
    check_close("dlogits from parts", joined, dbl(grad), kSameTol);
    bool zeros_kept = true;
    for (size_t i = 0; i < grad.size(); ++i) zeros_kept &= (grad[i] == 0.0f) == (joined[i] == 0.0f);
    CHECK(zeros_kept);
  }
  SUBCASE("every row ignored") {
    const Ids none(N, ignore);
    Vec l2 = poison(N), lse2 = poison(N), g2 = poison(logits.size());
    CHECK(cpu::crossentropy_forward(l2.data(), lse2.data(), whole, 1, none.data(), N, V, Vp, ignore) == 0);
    CHECK(same_bits(l2, Vec(N, 0.0f)));
    float* g2_whole[] = {g2.data()};
    cpu::crossentropy_backward(g2_whole, 1, lse2.data(), none.data(), 1.0f, N, V, Vp, ignore);
    CHECK(same_bits(g2, Vec(g2.size(), 0.0f)));
  }
}

TEST_CASE("adamw") {
  const size_t n = 1013;
  const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f, grad_scale = 0.37f;
  std::mt19937 gen(9);
  Vec p = normal(gen, n), m(n, 0.0f), v(n, 0.0f);
  const Vec p_start = p;
  DVec rp = dbl(p), rm(n, 0.0), rv(n, 0.0);
  for (int t = 1; t <= 5; ++t) {
    CAPTURE(t);
    Vec g = normal(gen, n, 3.0f);
    for (size_t i = 0; i < n; i += 7) g[i] *= 1e-6f;  // sqrt(v) ~ eps: where eps goes matters
    const DVec dg = dbl(g);
    cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t, grad_scale);
    // The float hyperparameters as doubles, so that both sides use the same numbers.
    ref::adamw_step<double>(rp.data(), dg.data(), rm.data(), rv.data(), n, lr, b1, b2, eps, wd, t, grad_scale);
    check_close("params", p, rp, 1e-6);
    check_close("m", m, rm, 1e-6);
    check_close("v", v, rv, 1e-6);
    Vec step(n);
    DVec ref_step(n);
    for (size_t i = 0; i < n; ++i) {
      step[i] = p[i] - p_start[i];
      ref_step[i] = rp[i] - p_start[i];
    }
    check_close("total update", step, ref_step, 1e-4);  // float params: one ulp of ~1 vs steps ~1e-3
  }
}

TEST_CASE("sum_squares") {
  for (size_t n : {size_t{1}, size_t{37}, size_t{1000003}}) {
    CAPTURE(n);
    std::mt19937 gen(10);
    const Vec x = normal(gen, n);
    const DVec dx = dbl(x);
    const double got = cpu::sum_squares(x.data(), n), again = cpu::sum_squares(x.data(), n);
    const double want = ref::sum_squares(dx.data(), n);
    CHECK(std::fabs(got - want) <= 1e-12 * want);
    CHECK(std::bit_cast<uint64_t>(got) == std::bit_cast<uint64_t>(again));
  }
}

// ------------------------------------------------------------------------------------------------

namespace {
float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
bool is_nan_bf16(uint16_t h) { return (h & 0x7fff) > 0x7f80; }
bool is_nan_f16(uint16_t h) { return (h & 0x7fff) > 0x7c00; }

// Non-NaN f32 values for the rounding checks: random bit patterns, and random values spread over
// f16's range (subnormals included) where random bits would rarely land.
Vec conversion_samples() {
  std::mt19937 gen(11);
  Vec out;
  for (int i = 0; i < 200000; ++i) {
    const float f = f32(static_cast<uint32_t>(gen()));
    if (!std::isnan(f)) out.push_back(f);
  }
  std::uniform_real_distribution<float> e(-26.0f, 17.0f), s(-1.0f, 1.0f);
  for (int i = 0; i < 200000; ++i) out.push_back(s(gen) * std::exp2(e(gen)));
  return out;
}
}  // namespace

TEST_CASE("bf16 conversions") {
  SUBCASE("f32 -> bf16 rounds to nearest even") {
    CHECK(zt::f32_to_bf16(1.0f) == 0x3f80);
    CHECK(zt::f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);          // halfway, down to even
    CHECK(zt::f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);      // halfway, up to even
    CHECK(zt::f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);  // just above halfway
    CHECK(zt::f32_to_bf16(-1.0f - 0x1p-8f) == 0xbf80);
    CHECK(zt::f32_to_bf16(-0.0f) == 0x8000);
    CHECK(zt::f32_to_bf16(kInf) == 0x7f80);
    CHECK(zt::f32_to_bf16(-kInf) == 0xff80);
    CHECK(zt::f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // past max + ulp/2: inf
    CHECK(zt::f32_to_bf16(f32(0x00000001u)) == 0x0000);                    // smallest subnormal
    for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xff800001u, 0xffffffffu}) {
      CAPTURE(nan);
      CHECK(is_nan_bf16(zt::f32_to_bf16(f32(nan))));
    }
    int wrong = 0;
    for (float f : conversion_samples()) wrong += zt::f32_to_bf16(f) != ref::bf16_from(f);
    CHECK(wrong == 0);
  }
  SUBCASE("bf16 -> f32 -> bf16 is exact for every non-NaN pattern") {
    int wrong = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
      const auto b = static_cast<uint16_t>(h);
      if (is_nan_bf16(b)) continue;
      const float f = zt::bf16_to_f32(b);
      wrong += zt::f32_to_bf16(f) != b || static_cast<double>(f) != ref::bf16_value(b);
    }
    CHECK(wrong == 0);
    CHECK(std::isnan(zt::bf16_to_f32(0x7fc0)));
  }
}

TEST_CASE("f16 conversions") {
  SUBCASE("f32 -> f16 rounds to nearest even") {
    CHECK(zt::f32_to_f16(1.0f) == 0x3c00);
    CHECK(zt::f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);      // halfway, down to even
    CHECK(zt::f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);  // halfway, up to even
    CHECK(zt::f32_to_f16(-2.0f) == 0xc000);
    CHECK(zt::f32_to_f16(-0.0f) == 0x8000);
    CHECK(zt::f32_to_f16(65504.0f) == 0x7bff);
    CHECK(zt::f32_to_f16(65519.0f) == 0x7bff);
    CHECK(zt::f32_to_f16(65520.0f) == 0x7c00);  // max + ulp/2: inf
    CHECK(zt::f32_to_f16(70000.0f) == 0x7c00);
    CHECK(zt::f32_to_f16(-70000.0f) == 0xfc00);
    CHECK(zt::f32_to_f16(kInf) == 0x7c00);
    CHECK(zt::f32_to_f16(-kInf) == 0xfc00);
    CHECK(zt::f32_to_f16(0x1p-24f) == 0x0001);               // smallest subnormal
    CHECK(zt::f32_to_f16(0x1p-25f) == 0x0000);               // halfway to it: even is 0
    CHECK(zt::f32_to_f16(0x1p-25f + 0x1p-40f) == 0x0001);
    CHECK(zt::f32_to_f16(3 * 0x1p-25f) == 0x0002);           // halfway between 1 and 2 ulps
    CHECK(zt::f32_to_f16(0x1p-14f - 0x1p-25f) == 0x0400);    // halfway, up into the normals
    CHECK(zt::f32_to_f16(0x1p-14f) == 0x0400);
    CHECK(zt::f32_to_f16(-0x1p-24f) == 0x8001);
    for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f801fffu, 0xff800001u, 0xffffffffu}) {
      CAPTURE(nan);
      CHECK(is_nan_f16(zt::f32_to_f16(f32(nan))));
    }
    int wrong = 0;
    for (float f : conversion_samples()) wrong += zt::f32_to_f16(f) != ref::f16_from(f);
    CHECK(wrong == 0);
  }
  SUBCASE("f16 -> f32 -> f16 is exact for every non-NaN pattern") {
    int wrong = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
      const auto b = static_cast<uint16_t>(h);
      if (is_nan_f16(b)) continue;
      const float f = zt::f16_to_f32(b);
      wrong += zt::f32_to_f16(f) != b || static_cast<double>(f) != ref::f16_value(b);
    }
    CHECK(wrong == 0);
    CHECK(std::isnan(zt::f16_to_f32(0x7e00)));
  }
}

TEST_CASE("array conversions match the scalar ones") {
  Vec f = conversion_samples();
  for (float x : {kNaN, -kNaN, kInf, -kInf, 0.0f, -0.0f, 1.0f + 0x1p-8f, 65520.0f, 0x1p-25f}) f.push_back(x);
  std::vector<uint16_t> all(65536), h(f.size());
  std::iota(all.begin(), all.end(), uint16_t{0});
  Vec back(all.size());

  cpu::f32_to_bf16(h.data(), f.data(), f.size());
  int wrong = 0;
  for (size_t i = 0; i < f.size(); ++i) wrong += h[i] != zt::f32_to_bf16(f[i]);
  CHECK(wrong == 0);
  cpu::f32_to_f16(h.data(), f.data(), f.size());
  wrong = 0;
  for (size_t i = 0; i < f.size(); ++i) wrong += h[i] != zt::f32_to_f16(f[i]);
  CHECK(wrong == 0);
  cpu::bf16_to_f32(back.data(), all.data(), all.size());
  wrong = 0;
  for (size_t i = 0; i < all.size(); ++i) wrong += std::bit_cast<uint32_t>(back[i]) != std::bit_cast<uint32_t>(zt::bf16_to_f32(all[i]));
  CHECK(wrong == 0);
  cpu::f16_to_f32(back.data(), all.data(), all.size());
  wrong = 0;
  for (size_t i = 0; i < all.size(); ++i) wrong += std::bit_cast<uint32_t>(back[i]) != std::bit_cast<uint32_t>(zt::f16_to_f32(all[i]));
  CHECK(wrong == 0);
}
