#include <cmath>
#include <cstddef>
#include <vector>

#include <omp.h>

#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

namespace {
constexpr float kEps = 1e-5f;  // GPT-2's
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    float* o = out + static_cast<size_t>(i) * C;
    float m = 0.0f;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    float var = 0.0f;  // two passes: the one-pass formula cancels badly for large means
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / std::sqrt(var / C + kEps);
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
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
#pragma omp parallel num_threads(nt)
  {
    float* dw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * C;
    float* db = dw + C;
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      const float* x = inp + static_cast<size_t>(i) * C;
      const float* d = dout + static_cast<size_t>(i) * C;
      const float m = mean[i], s = rstd[i];
      float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
      for (int c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        const float dnorm = weight[c] * d[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
        dw[c] += norm * d[c];
        db[c] += d[c];
      }
      dnorm_mean /= C;
      dnorm_norm_mean /= C;
      if (dinp) {
        float* di = dinp + static_cast<size_t>(i) * C;
        for (int c = 0; c < C; ++c) {
          const float norm = (x[c] - m) * s;
          di[c] += (weight[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
      }
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
