#include <cmath>
#include <cstddef>
#include <vector>

#include <omp.h>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

namespace {
constexpr float kEps = 1e-5f;  // GPT-2's
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
  ConstArrayMap w(weight, C), b(bias, C);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    ConstArrayMap x(inp + static_cast<size_t>(i) * C, C);
    // Two passes (the one-pass formula cancels badly for large means), each a vectorised Eigen
    // reduction: a plain loop's float sum is one chain of dependent adds.
    const float m = x.mean();
    const float s = 1.0f / std::sqrt((x - m).square().mean() + kEps);
    ArrayMap(out + static_cast<size_t>(i) * C, C) = (x - m) * s * w + b;
    mean[i] = m;
    rstd[i] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C) {
  // dinp rows are independent; dweight/dbias sum over rows, so each thread sums its own rows
  // into its own slot, and the slots are added in thread order: the result does not depend on
  // scheduling, so runs repeat bit for bit.
  const int nt = omp_get_max_threads();
  std::vector<float> partial(static_cast<size_t>(nt) * 2 * C, 0.0f);
  ConstArrayMap w(weight, C);
#pragma omp parallel num_threads(nt)
  {
    ArrayMap dw(partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * C, C);
    ArrayMap db(dw.data() + C, C);
    Eigen::ArrayXf norm(C), dnorm(C);  // the row's, reused
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      ConstArrayMap x(inp + static_cast<size_t>(i) * C, C), d(dout + static_cast<size_t>(i) * C, C);
      norm = (x - mean[i]) * rstd[i];
      dnorm = w * d;
      const float dnorm_mean = dnorm.mean(), dnorm_norm_mean = (dnorm * norm).mean();
      dw += norm * d;
      db += d;
      if (dinp)
        ArrayMap(dinp + static_cast<size_t>(i) * C, C) += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[i];
    }
  }
  for (int t = 0; t < nt; ++t) {
    const float* dw = partial.data() + static_cast<size_t>(t) * 2 * C;
    for (int c = 0; c < C; ++c) {
      if (dweight) dweight[c] += dw[c];
      if (dbias) dbias[c] += dw[C + c];
    }
  }
}

}  // namespace zt::cpu
