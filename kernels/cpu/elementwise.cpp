#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/backend.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

namespace {
// Elementwise kernels run over cache-sized chunks, one chunk per task, through Eigen's arrays so
// that tanh and friends are vectorised.
constexpr size_t kChunk = 16384;

template <class F> void for_chunks(size_t n, F&& f) {
  const long chunks = static_cast<long>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < chunks; ++i) {
    const size_t lo = static_cast<size_t>(i) * kChunk;
    f(lo, std::min(n, lo + kChunk) - lo);
  }
}
}  // namespace

void gelu_forward(float* out, const float* inp, size_t n) {
  for_chunks(n, [&](size_t lo, size_t len) {
    ConstArrayMap x(inp + lo, static_cast<Eigen::Index>(len));
    ArrayMap(out + lo, static_cast<Eigen::Index>(len)) = gelu(x);
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  if (!dinp) return;
  for_chunks(n, [&](size_t lo, size_t len) {
    const auto m = static_cast<Eigen::Index>(len);
    ConstArrayMap x(inp + lo, m), d(dout + lo, m);
    const Eigen::ArrayXf t = gelu_tanh(x);
    ArrayMap(dinp + lo, m) += d * gelu_grad(x, t);
  });
}

void residual_forward(float* out, const float* a, const float* b, size_t n) {
  for_chunks(n, [&](size_t lo, size_t len) {
    const auto m = static_cast<Eigen::Index>(len);
    ArrayMap(out + lo, m) = ConstArrayMap(a + lo, m) + ConstArrayMap(b + lo, m);
  });
}

void add_columns_forward(float* out, const float* y, const float* d, int N, int OC, int c0, int n, float scale) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const size_t row = static_cast<size_t>(i) * OC;
    if (out != y) std::copy_n(y + row, OC, out + row);
    ArrayMap(out + row + c0, n) += scale * ConstArrayMap(d + static_cast<size_t>(i) * n, n);
  }
}

void add_columns_backward(float* dy, float* dd, const float* dout, int N, int OC, int c0, int n, float scale) {
  if (dy) residual_backward(dy, nullptr, dout, static_cast<size_t>(N) * OC);
  if (!dd) return;
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i)
    ArrayMap(dd + static_cast<size_t>(i) * n, n) += scale * ConstArrayMap(dout + static_cast<size_t>(i) * OC + c0, n);
}

void dropout_forward(float* out, const float* x, size_t n, uint64_t seed, uint32_t threshold, float scale) {
  const DropoutMask m{seed, threshold, scale};
  const auto count = static_cast<int64_t>(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) out[i] = dropout_keeps(m, static_cast<uint64_t>(i)) ? x[i] * scale : 0.0f;
}

void dropout_backward(float* dx, const float* dout, size_t n, uint64_t seed, uint32_t threshold, float scale) {
  const DropoutMask m{seed, threshold, scale};
  const auto count = static_cast<int64_t>(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i)
    if (dropout_keeps(m, static_cast<uint64_t>(i))) dx[i] += dout[i] * scale;
}

void residual_backward(float* da, float* db, const float* dout, size_t n) {
  for_chunks(n, [&](size_t lo, size_t len) {
    const auto m = static_cast<Eigen::Index>(len);
    if (da) ArrayMap(da + lo, m) += ConstArrayMap(dout + lo, m);
    if (db) ArrayMap(db + lo, m) += ConstArrayMap(dout + lo, m);
  });
}

}  // namespace zt::cpu
