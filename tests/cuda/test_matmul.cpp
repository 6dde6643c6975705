// matmul_forward/backward (cuBLASLt) against cpu::matmul_forward/backward, f32 and bf16: shapes
// from one row to GPT-2's MLP, and one with C and OC not multiples of 8 (f32 only: bf16 refuses
// it); with and without bias; the fused GELU (pre-activation and output); backwards accumulating
// onto random gradients, with every subset of gradients, the GELU gradient into its own buffer or
// over dout; arguments cuBLASLt cannot take; the plan cache; two streams sharing the workspace.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/kernels.hpp"
#include "kernels/cuda/cublaslt.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

namespace {

struct Dims {
  int N, C, OC;
};
constexpr Dims kShapes[] = {{1, 8, 8}, {17, 24, 40}, {64, 768, 2304}, {256, 768, 3072}};
constexpr Dims kUnaligned = {33, 13, 21};

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

// Weights scaled like an initialised layer (pre-activations of order 1, where GELU bends).
std::vector<float> weights(Dims d) {
  const float a = 2.0f / std::sqrt(static_cast<float>(d.C));
  return random_vec(sz(d.OC, d.C), -a, a);
}

template <class T>
void check_forward(Dims d, bool with_bias, bool gelu) {
  CAPTURE(d.N);
  CAPTURE(d.C);
  CAPTURE(d.OC);
  CAPTURE(with_bias);
  CAPTURE(gelu);
  const auto inp = rounded<T>(random_vec(sz(d.N, d.C))), w = rounded<T>(weights(d)),
             b = rounded<T>(random_vec(static_cast<size_t>(d.OC)));
  DeviceBuffer<T> dinp(inp), dw(w), db(b), out(sz(d.N, d.OC)), pre(sz(d.N, d.OC));
  out.poison();
  pre.poison();
  cuda::matmul_forward<T>(out, dinp, dw, with_bias ? db.get() : nullptr, d.N, d.C, d.OC, nullptr,
                          gelu ? pre.get() : nullptr);
  std::vector<float> ref_pre(sz(d.N, d.OC)), ref_out(ref_pre.size());
  cpu::matmul_forward(ref_pre.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, d.N, d.C, d.OC);
  if (!gelu) {
    expect_close(out.download(), ref_pre, kTol<T>, "matmul_forward");
    return;
  }
  cpu::gelu_forward(ref_out.data(), ref_pre.data(), ref_out.size());
  expect_close(pre.download(), ref_pre, kTol<T>, "matmul_forward pre_gelu");
  expect_close(out.download(), ref_out, kTol<T>, "matmul_forward gelu(pre_gelu)");
}

enum Grad : unsigned { kDinp = 1, kDweight = 2, kDbias = 4 };

template <class T>
void check_backward(Dims d, unsigned grads, bool gelu, bool in_place) {
  CAPTURE(d.N);
  CAPTURE(d.C);
  CAPTURE(d.OC);
  CAPTURE(grads);
  CAPTURE(gelu);
  CAPTURE(in_place);
  const size_t nout = sz(d.N, d.OC);
  const auto inp = rounded<T>(random_vec(sz(d.N, d.C))), w = rounded<T>(weights(d)),
             dout = rounded<T>(random_vec(nout)), pre = rounded<T>(random_vec(nout, -3, 3));
  auto dinp = rounded<T>(random_vec(sz(d.N, d.C))), dw = rounded<T>(random_vec(sz(d.OC, d.C))),
       db = rounded<T>(random_vec(static_cast<size_t>(d.OC)));
  DeviceBuffer<T> g_inp(inp), g_w(w), g_dout(dout), g_pre(pre), g_dinp(dinp), g_dw(dw), g_db(db), g_dpre(nout);
  g_dpre.poison();
  T* dpre = in_place ? g_dout.get() : g_dpre.get();
  cuda::matmul_backward<T>(grads & kDinp ? g_dinp.get() : nullptr, grads & kDweight ? g_dw.get() : nullptr,
                           grads & kDbias ? g_db.get() : nullptr, g_dout, g_inp, g_w, d.N, d.C, d.OC, nullptr,
                           gelu ? g_pre.get() : nullptr, gelu ? dpre : nullptr);

  // The gradient the GEMMs take: dout, or dout * gelu'(pre) as the GPU stores it (rounded to T).
  std::vector<float> g = dout;
  if (gelu) {
    std::fill(g.begin(), g.end(), 0.0f);
    cpu::gelu_backward(g.data(), pre.data(), dout.data(), nout);
    g = rounded<T>(g);
  }
  cpu::matmul_backward(grads & kDinp ? dinp.data() : nullptr, grads & kDweight ? dw.data() : nullptr,
                       grads & kDbias ? db.data() : nullptr, g.data(), inp.data(), w.data(), d.N, d.C, d.OC);
  // Skipped gradients keep their initial values (the CPU left them alone too).
  expect_close(g_dinp.download(), dinp, kTol<T>, "matmul_backward dinp");
  expect_close(g_dw.download(), dw, kTol<T>, "matmul_backward dweight");
  expect_close(g_db.download(), db, kTol<T>, "matmul_backward dbias");
  if (gelu) expect_close(in_place ? g_dout.download() : g_dpre.download(), g, kTol<T>, "matmul_backward dpre_gelu");
  if (!gelu || !in_place) CHECK(g_dout.download() == dout);  // the caller's dout is left alone
}

}  // namespace

TEST_CASE_TEMPLATE("matmul_forward matches the CPU, with bias, without, and with the fused GELU", T, float, bf16) {
  for (Dims d : kShapes)
    for (bool with_bias : {true, false})
      for (bool gelu : {false, true}) check_forward<T>(d, with_bias, gelu);
}

TEST_CASE_TEMPLATE("matmul_backward accumulates like the CPU, every subset of gradients", T, float, bf16) {
  for (Dims d : kShapes)
    for (unsigned grads : {kDinp | kDweight | kDbias, unsigned{kDinp}, kDweight | kDbias, unsigned{kDbias}})
      for (bool gelu : {false, true}) check_backward<T>(d, grads, gelu, false);
}

TEST_CASE_TEMPLATE("matmul_backward: the GELU gradient written over dout", T, float, bf16) {
  for (Dims d : {kShapes[1], kShapes[3]}) {
    check_backward<T>(d, kDinp | kDweight | kDbias, true, true);
    check_backward<T>(d, kDweight, true, true);
  }
}

TEST_CASE("matmul in f32 with C and OC not multiples of 8") {
  for (bool with_bias : {true, false}) check_forward<float>(kUnaligned, with_bias, false);
  for (unsigned grads : {kDinp | kDweight | kDbias, unsigned{kDweight}}) check_backward<float>(kUnaligned, grads, true, false);
  check_backward<float>(kUnaligned, kDinp | kDbias, false, false);
}

TEST_CASE("matmul: what cuBLASLt cannot take is refused with std::invalid_argument") {
  const Dims d = kUnaligned;
  DeviceBuffer<bf16> inp(sz(d.N, 16) + 8), w(sz(d.OC, 16) + 8), out(sz(d.N, d.OC) + 8), pre(sz(d.N, d.OC) + 8);
  // bf16 with C and OC not multiples of 8
  CHECK_THROWS_AS(cuda::matmul_forward<bf16>(out, inp, w, nullptr, d.N, d.C, d.OC, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::matmul_backward<bf16>(inp, w, nullptr, out, inp, w, d.N, d.C, d.OC, nullptr),
                  std::invalid_argument);
  // bf16 at an address that is not 16-byte aligned
  CHECK_THROWS_AS(cuda::matmul_forward<bf16>(out, inp + 1, w, nullptr, d.N, 16, 16, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::matmul_backward<bf16>(inp, nullptr, nullptr, out + 1, inp, w, d.N, 16, 16, nullptr),
                  std::invalid_argument);
  // the fused GELU with OC not a multiple of 8, in f32 too
  DeviceBuffer<float> fi(sz(d.N, d.C)), fw(sz(d.OC, d.C)), fo(sz(d.N, d.OC)), fp(sz(d.N, d.OC));
  CHECK_THROWS_AS(cuda::matmul_forward<float>(fo, fi, fw, nullptr, d.N, d.C, d.OC, nullptr, fp), std::invalid_argument);
  // the GELU gradient needs somewhere to go
  CHECK_THROWS_AS(cuda::matmul_backward<float>(fi, nullptr, nullptr, fo, fi, fw, d.N, d.C, d.OC, nullptr, fp),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::matmul_forward<float>(fo, fi, fw, nullptr, d.N, 0, d.OC, nullptr), std::invalid_argument);
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // nothing was queued that failed
}

TEST_CASE("matmul: a repeated step makes no heuristic query") {
  const Dims d = {48, 64, 96};  // a shape no other test uses
  auto step = [&] {
    check_forward<float>(d, true, true);
    check_backward<float>(d, kDinp | kDweight | kDbias, true, false);
    check_backward<bf16>(d, kDinp | kDweight | kDbias, false, false);
  };
  const uint64_t before = cuda::gemm_heuristic_queries();
  step();
  const uint64_t first = cuda::gemm_heuristic_queries();
  CHECK(first > before);
  step();
  CHECK(cuda::gemm_heuristic_queries() == first);
}

TEST_CASE("matmul: backwards on two streams share the workspace one after the other") {
  const Dims d = kShapes[3];
  const size_t nout = sz(d.N, d.OC);
  cudaStream_t streams[2];
  for (cudaStream_t& s : streams) cuda::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  const auto inp = random_vec(sz(d.N, d.C)), w = weights(d);
  const std::vector<float> douts[2] = {random_vec(nout), random_vec(nout)};
  DeviceBuffer<float> g_inp(inp), g_w(w), g_dout0(douts[0]), g_dout1(douts[1]);
  DeviceBuffer<float>*const g_douts[2] = {&g_dout0, &g_dout1};
  std::vector<float> zeros_b(static_cast<size_t>(d.OC)), zeros_w(sz(d.OC, d.C));
  DeviceBuffer<float> db0(zeros_b), db1(zeros_b), dw0(zeros_w), dw1(zeros_w);
  DeviceBuffer<float>*const dbs[2] = {&db0, &db1};
  DeviceBuffer<float>*const dws[2] = {&dw0, &dw1};
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (int round = 0; round < 4; ++round)
    for (int i = 0; i < 2; ++i)
      cuda::matmul_backward<float>(nullptr, *dws[i], *dbs[i], *g_douts[i], g_inp, g_w, d.N, d.C, d.OC, streams[i]);
  for (int i = 0; i < 2; ++i) {
    std::vector<float> ref_b(zeros_b), ref_w(zeros_w);
    for (int round = 0; round < 4; ++round)
      cpu::matmul_backward(nullptr, ref_w.data(), ref_b.data(), douts[i].data(), inp.data(), w.data(), d.N, d.C, d.OC);
    expect_close(dbs[i]->download(), ref_b, kTol<float>, "dbias on stream " + std::to_string(i));
    expect_close(dws[i]->download(), ref_w, kTol<float>, "dweight on stream " + std::to_string(i));
  }
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
}

}  // namespace zt::test
