// RMSNorm, SwiGLU and RoPE (kernels/cuda/llama_ops.cu) against their CPU twins, f32 and bf16:
// one row, widths the 16-byte packs do not divide (the scalar path), rows at an odd offset (off
// 16-byte alignment), more rows than rmsnorm's backward has blocks, rows wider than a block, null
// gradients, and rmsnorm's dweight repeating bit for bit. RoPE with grouped-query heads (NKV <
// NH), positions up to 4096 (angles of thousands of radians, where a fast sine would stray), odd
// hs/2, in place, and an odd head size refused.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/cpu/kernels.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

namespace {

constexpr float kEps = 1e-5f;

struct Rows {
  int N, C;  // C: rmsnorm's channels, swiglu's F
};
constexpr Rows kShapes[] = {{1, 8}, {1, 3}, {7, 13}, {5, 768}, {600, 24}, {3, 5000}, {2, 16384}, {33, 100}, {64, 1376}};

std::vector<float> slice(const std::vector<float>& v, size_t off) { return {v.begin() + long(off), v.end()}; }

// The largest |got - ref| (non-finite: infinity).
double max_abs_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  double most = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(ref[i]));
    most = std::isfinite(d) ? std::max(most, d) : INFINITY;
  }
  return most;
}

}  // namespace

// ---- RMSNorm ----

TEST_CASE_TEMPLATE("rmsnorm forward matches the CPU", T, float, bf16) {
  for (const Rows r : kShapes) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      CAPTURE(r.N);
      CAPTURE(r.C);
      CAPTURE(off);
      const size_t n = size_t(r.N) * r.C;
      const auto x = rounded<T>(random_vec(n + off, -2.f, 2.f)), w = rounded<T>(random_vec(size_t(r.C)));
      DeviceBuffer<T> dx(x), dw(w), out(n + off);
      DeviceBuffer<float> rstd(size_t(r.N));
      std::vector<float> ref(n), ref_rstd(size_t(r.N));
      out.poison();
      rstd.poison();
      cuda::rmsnorm_forward<T>(out + off, rstd, dx + off, dw, r.N, r.C, kEps, 0.0f, nullptr);
      cpu::rmsnorm_forward(ref.data(), ref_rstd.data(), x.data() + off, w.data(), r.N, r.C, kEps, 0.0f);
      expect_close(slice(out.download(), off), ref, kTol<T>, "rmsnorm_forward out");
      expect_close(rstd.download(), ref_rstd, 1e-5, "rmsnorm_forward rstd");
    }
  }
}

TEST_CASE_TEMPLATE("rmsnorm backward matches the CPU and repeats bit for bit", T, float, bf16) {
  for (const Rows r : kShapes) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      CAPTURE(r.N);
      CAPTURE(r.C);
      CAPTURE(off);
      const size_t n = size_t(r.N) * r.C;
      const auto x = rounded<T>(random_vec(n + off, -2.f, 2.f)), d = rounded<T>(random_vec(n + off));
      const auto w = rounded<T>(random_vec(size_t(r.C)));
      const auto di0 = rounded<T>(random_vec(n + off)), dw0 = rounded<T>(random_vec(size_t(r.C)));
      std::vector<float> out(n), rstd(size_t(r.N));
      cpu::rmsnorm_forward(out.data(), rstd.data(), x.data() + off, w.data(), r.N, r.C, kEps, 0.0f);

      DeviceBuffer<T> dx(x), dd(d), dw(w), ddi(di0), ddw(dw0);
      DeviceBuffer<float> drstd(rstd), scratch(cuda::rmsnorm_backward_scratch_floats(r.N, r.C));
      std::vector<float> ref_di = slice(di0, off), ref_dw = dw0;
      scratch.poison();
      cuda::rmsnorm_backward<T>(ddi + off, ddw, dd + off, dx + off, dw, drstd, r.N, r.C, 0.0f, scratch, nullptr);
      cpu::rmsnorm_backward(ref_di.data(), ref_dw.data(), d.data() + off, x.data() + off, w.data(), rstd.data(), r.N,
                            r.C, 0.0f);
      const auto got_di = ddi.download(), got_dw = ddw.download();
      expect_close(slice(got_di, off), ref_di, kTol<T>, "rmsnorm_backward dinp");
      expect_close(got_dw, ref_dw, kTol<T>, "rmsnorm_backward dweight");
      CHECK(std::equal(got_di.begin(), got_di.begin() + long(off), di0.begin()));  // before the rows: untouched

      // Again from the same start: the same bits.
      ddi.upload(di0);
      ddw.upload(dw0);
      cuda::rmsnorm_backward<T>(ddi + off, ddw, dd + off, dx + off, dw, drstd, r.N, r.C, 0.0f, scratch, nullptr);
      CHECK(ddi.download() == got_di);
      CHECK(ddw.download() == got_dw);

      // dweight alone (dinp null), then dinp alone (no scratch needed): the same bits again.
      ddw.upload(dw0);
      cuda::rmsnorm_backward<T>(nullptr, ddw, dd + off, dx + off, dw, drstd, r.N, r.C, 0.0f, scratch, nullptr);
      CHECK(ddw.download() == got_dw);
      ddi.upload(di0);
      cuda::rmsnorm_backward<T>(ddi + off, nullptr, dd + off, dx + off, dw, drstd, r.N, r.C, 0.0f, nullptr, nullptr);
      CHECK(ddi.download() == got_di);
      cuda::rmsnorm_backward<T>(nullptr, nullptr, dd + off, dx + off, dw, drstd, r.N, r.C, 0.0f, nullptr, nullptr);
      CHECK(ddi.download() == got_di);
    }
  }
}

TEST_CASE("rmsnorm backward refuses dweight without scratch") {
  const int N = 4, C = 8;
  DeviceBuffer<float> x(random_vec(N * C)), d(random_vec(N * C)), w(random_vec(C)), dw(C), rstd(random_vec(N));
  CHECK_THROWS_AS(cuda::rmsnorm_backward<float>(nullptr, dw, d, x, w, rstd, N, C, 0.0f, nullptr, nullptr),
                  std::invalid_argument);
}

// ---- SwiGLU ----

TEST_CASE_TEMPLATE("swiglu forward and backward match the CPU", T, float, bf16) {
  for (const Rows r : kShapes) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      const int N = r.N, F = r.C;
      CAPTURE(N);
      CAPTURE(F);
      CAPTURE(off);
      const size_t n = size_t(N) * F;
      auto x = random_vec(2 * n + off, -6.f, 6.f);
      if (n >= 4) {  // the sigmoid's tails: exp(-g) overflowing and vanishing
        x[off] = -100.f;
        x[off + 1] = 100.f;
        x[off + 2] = -30.f;
      }
      x = rounded<T>(x);
      const auto d = rounded<T>(random_vec(n + off)), di0 = rounded<T>(random_vec(2 * n + off));
      DeviceBuffer<T> dx(x), dd(d), out(n + off), ddi(di0);

      out.poison();
      std::vector<float> ref(n);
      cuda::swiglu_forward<T>(out + off, dx + off, N, F, nullptr);
      cpu::swiglu_forward(ref.data(), x.data() + off, N, F);
      expect_close(slice(out.download(), off), ref, kTol<T>, "swiglu_forward out");

      std::vector<float> ref_di = slice(di0, off);
      cuda::swiglu_backward<T>(ddi + off, dx + off, dd + off, N, F, nullptr);
      cpu::swiglu_backward(ref_di.data(), x.data() + off, d.data() + off, N, F);
      const auto got_di = ddi.download();
      expect_close(slice(got_di, off), ref_di, kTol<T>, "swiglu_backward dinp");
      CHECK(std::equal(got_di.begin(), got_di.begin() + long(off), di0.begin()));

      cuda::swiglu_backward<T>(nullptr, dx + off, dd + off, N, F, nullptr);  // skipped
      CHECK(ddi.download() == got_di);
    }
  }
}

// ---- RoPE ----

namespace {

struct Heads {
  int B, T, NH, NKV, hs;
};
// hs/2 = 1, 3, 5: the scalar path; NKV < NH: grouped-query attention; T to 4096.
constexpr Heads kHeads[] = {{1, 1, 1, 1, 2},    {2, 5, 4, 2, 8},     {3, 17, 6, 2, 6},   {1, 7, 3, 1, 10},
                            {1, 300, 4, 1, 64}, {2, 300, 8, 8, 128}, {2, 64, 32, 8, 64}, {1, 300, 2, 1, 16},
                            {1, 4096, 1, 1, 8}, {2, 33, 4, 0, 16}};

// Llama's: inv_freq[i] = 1 / 10000^(2i/hs), in f32.
std::vector<float> inv_freqs(int hs) {
  std::vector<float> f(size_t(hs / 2));
  for (int i = 0; i < hs / 2; ++i) f[size_t(i)] = float(1.0 / std::pow(10000.0, 2.0 * i / hs));
  return f;
}

}  // namespace

TEST_CASE_TEMPLATE("rope forward and backward match the CPU", T, float, bf16) {
  for (const Heads h : kHeads) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      CAPTURE(h.B);
      CAPTURE(h.T);
      CAPTURE(h.NH);
      CAPTURE(h.NKV);
      CAPTURE(h.hs);
      CAPTURE(off);
      const size_t n = size_t(h.B) * h.T * (h.NH + 2 * h.NKV) * h.hs;
      const auto x = rounded<T>(random_vec(n + off)), d = rounded<T>(random_vec(n + off));
      const auto di0 = rounded<T>(random_vec(n + off));
      const auto freq = inv_freqs(h.hs);
      DeviceBuffer<T> dx(x), dd(d), out(n + off), ddi(di0);
      DeviceBuffer<float> dfreq(freq);

      out.poison();
      std::vector<float> ref(n);
      cuda::rope_forward<T>(out + off, dx + off, dfreq, h.B, h.T, h.NH, h.NKV, h.hs, nullptr);
      cpu::rope_forward(ref.data(), x.data() + off, freq.data(), h.B, h.T, h.NH, h.NKV, h.hs);
      const auto got = slice(out.download(), off);
      expect_close(got, ref, kTol<T>, "rope_forward out");
      // Every element, not only the norm: a wrong angle or a fast sine at large t shows here.
      if constexpr (std::is_same_v<T, float>) CHECK(max_abs_diff(got, ref) <= 1e-5);

      // In place (out == inp): the same.
      DeviceBuffer<T> inplace(x);
      cuda::rope_forward<T>(inplace + off, inplace + off, dfreq, h.B, h.T, h.NH, h.NKV, h.hs, nullptr);
      CHECK(slice(inplace.download(), off) == got);

      std::vector<float> ref_di = slice(di0, off);
      cuda::rope_backward<T>(ddi + off, dd + off, dfreq, h.B, h.T, h.NH, h.NKV, h.hs, nullptr);
      cpu::rope_backward(ref_di.data(), d.data() + off, freq.data(), h.B, h.T, h.NH, h.NKV, h.hs);
      const auto got_di = ddi.download();
      expect_close(slice(got_di, off), ref_di, kTol<T>, "rope_backward dinp");
      if constexpr (std::is_same_v<T, float>) CHECK(max_abs_diff(slice(got_di, off), ref_di) <= 1e-5);
      CHECK(std::equal(got_di.begin(), got_di.begin() + long(off), di0.begin()));

      cuda::rope_backward<T>(nullptr, dd + off, dfreq, h.B, h.T, h.NH, h.NKV, h.hs, nullptr);  // skipped
      CHECK(ddi.download() == got_di);
    }
  }
}

TEST_CASE("rope refuses an odd head size") {
  const int B = 1, T = 2, NH = 2, NKV = 1, hs = 5;
  const size_t n = size_t(B) * T * (NH + 2 * NKV) * hs;
  DeviceBuffer<float> x(random_vec(n)), out(n), freq(random_vec(3));
  CHECK_THROWS_AS(cuda::rope_forward<float>(out, x, freq, B, T, NH, NKV, hs, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::rope_backward<float>(out, x, freq, B, T, NH, NKV, hs, nullptr), std::invalid_argument);
}

}  // namespace zt::test
