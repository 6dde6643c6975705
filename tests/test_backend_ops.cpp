// The backend-op sweep on the CPU (tests/backend_ops.hpp): every row of the table, in every
// dtype the CPU backend takes, at every shape of the row:
// (a) the forward against the row's float64 reference, on outputs poisoned with NaN;
// (b) the backward against central finite differences of that reference, for the loss
//     L = sum over outputs of dot(out, dout), douts random; gradient buffers start at a random
//     g0 and grad - g0 is compared, which checks that backwards accumulate (+=);
// (c) every gradient computed alone (the others undefined) equal to it computed with the
//     others, and a backward with no gradient at all harmless: undefined gradients are skipped;
// and every dtype the backend does not compute in, and every shape it does not take, refused
// with std::invalid_argument. Failures name the op, dtype, shape and tensor.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "tests/backend_ops.hpp"

namespace zt::sweep {

namespace {

constexpr double kH = 1e-5;  // the finite-difference step, on values of size 1 to 30
// Differences of the float64 reference are good to ~1e-9 (h^2 truncation, 1e-16/h rounding),
// so the bound is the f32 kernels' own error on gradients that are differences themselves
// (softmax, layernorm's centred sums): at most 1e-6 on these shapes, and 4e-6 (absolute, against
// an exact 0) for layernorm's dx at C = 1, where a fused multiply-add leaves w*d - w*d nonzero.
constexpr double kGradTol = 1e-4;
// A gradient computed alone against the same computed beside the others: the same arithmetic.
constexpr double kSameTol = 1e-6;
// Inputs up to kEvery elements are differenced at every element; larger ones at kSamples
// elements, the first and the last among them.
constexpr size_t kEvery = 600, kSamples = 300;

double loss(const Problem& p, const std::vector<DVec>& in) {
  const std::vector<DVec> out = p.reference(in);
  double l = 0;
  for (size_t j = 0; j < p.out.size(); ++j)
    for (size_t k = 0; k < p.out[j].dout.size(); ++k) l += out[j][k] * p.out[j].dout[k];
  return l;
}

std::vector<size_t> points(size_t n, std::mt19937& gen) {
  std::vector<size_t> idx(std::min(n, n <= kEvery ? n : kSamples));
  if (n <= kEvery) {
    std::iota(idx.begin(), idx.end(), size_t{0});
  } else {
    std::uniform_int_distribution<size_t> d(0, n - 1);
    for (size_t& i : idx) i = d(gen);
    idx[0] = 0;
    idx[1] = n - 1;
  }
  return idx;
}

void check_forward(const Problem& p, const Result& r, const std::string& what) {
  std::vector<DVec> in;
  for (const In& x : p.in) in.push_back(x.v);
  const std::vector<DVec> want = p.reference(in);
  for (size_t j = 0; j < p.out.size(); ++j) {
    const Out& o = p.out[j];
    expect_close(r.out[j], want[j], o.host ? kHostTol : tolerance(o.dtype), o.exact, o.exact_zeros,
                 what + ": " + o.name);
  }
}

void check_gradients(const Problem& p, const Result& r, const std::string& what, std::mt19937& gen) {
  std::vector<DVec> in;
  for (const In& x : p.in) in.push_back(x.v);
  for (size_t i = 0; i < p.in.size(); ++i) {
    if (!p.in[i].grad) continue;
    const std::vector<size_t> idx = points(in[i].size(), gen);
    DVec got(idx.size()), want(idx.size());
    for (size_t k = 0; k < idx.size(); ++k) {
      double& x = in[i][idx[k]];
      const double x0 = x;
      x = x0 + kH;
      const double up = loss(p, in);
      x = x0 - kH;
      const double down = loss(p, in);
      x = x0;
      want[k] = (up - down) / (2 * kH);
      got[k] = r.grad[i][idx[k]] - (p.overwrites ? 0.0 : p.in[i].g0[idx[k]]);
    }
    expect_close(got, want, kGradTol, false, p.in[i].exact_zeros, what + ": d" + p.in[i].name);
  }
}

void check_skipped(const Backend& be, const Problem& p, const Result& all, const std::string& what) {
  if (p.overwrites) return;  // its gradients are its inputs: never undefined
  std::vector<bool> want(p.in.size(), false);
  const Result none = run(be, cpu_allocator(), p, true, want);
  for (const DVec& g : none.grad) CHECK(g.empty());
  for (size_t i = 0; i < p.in.size(); ++i) {
    if (!p.in[i].grad) continue;
    want[i] = true;
    const Result one = run(be, cpu_allocator(), p, true, want);
    want[i] = false;
    for (size_t k = 0; k < p.in.size(); ++k) CHECK(one.grad[k].empty() == (k != i));
    expect_close(one.grad[i], all.grad[i], kSameTol, false, false, what + ": d" + p.in[i].name + " alone");
  }
}

}  // namespace

TEST_CASE("every backend op on the CPU against float64 references and finite differences") {
  const Backend& be = backend(Device::cpu);
  std::mt19937 gen(20240917);
  for_each_case(be, cpu_allocator(), gen, [&](const OpRow&, const Types&, const Problem& p, const std::string& what) {
    const Result r = run(be, cpu_allocator(), p);
    check_forward(p, r, what);
    if (p.backward) {
      check_gradients(p, r, what, gen);
      check_skipped(be, p, r, what);
    }
  });
}

TEST_CASE("the CPU backend refuses the dtypes it does not compute in") {
  const Backend& be = backend(Device::cpu);
  std::mt19937 gen(7);
  check_refused_dtypes(be, cpu_allocator(), gen);
}

TEST_CASE("dropout masks drop a share p of the elements, independently of seed and position") {
  // [Note: dropout masks]: the rule the sweep's reference shares with the kernels, held to its
  // statistics: the share dropped within 4 standard deviations of p, and two seeds' masks
  // agreeing as independent ones would.
  constexpr int kN = 200000;
  for (float p : {0.05f, 0.3f, 0.9f}) {
    CAPTURE(p);
    const DropoutMask a = dropout_mask(p, 1), b = dropout_mask(p, 2);
    CHECK(a.scale == doctest::Approx(1.0 / (1.0 - p)));
    int dropped = 0, both = 0;
    for (int i = 0; i < kN; ++i) {
      const bool da = !dropout_keeps(a, uint64_t(i)), db = !dropout_keeps(b, uint64_t(i));
      dropped += da;
      both += da && db;
    }
    const double sd = std::sqrt(kN * p * (1 - p));
    CHECK(std::abs(dropped - kN * p) < 4 * sd);
    CHECK(std::abs(both - kN * p * p) < 4 * std::sqrt(kN * p * p * (1 - p * p)));
  }
  CHECK(dropout_keeps(dropout_mask(0.0f, 7), 123));  // p 0 keeps everything
}

}  // namespace zt::sweep
