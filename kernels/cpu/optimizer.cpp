#include <cmath>
#include <cstddef>
#include <vector>

#include <omp.h>

#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int t, float grad_scale) {
  // The same operations in the same order as torch.optim.AdamW, so results agree to rounding.
  const float decay = 1.0f - lr * weight_decay;
  const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(t));
  const float bc2_sqrt = std::sqrt(1.0f - std::pow(beta2, static_cast<float>(t)));
  const float step = lr / bc1;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] = params[i] * decay - step * mi / (std::sqrt(vi) / bc2_sqrt + eps);
  }
}

double sum_squares(const float* x, size_t n) {
  // Per-thread partials added in thread order: the norm repeats bit for bit run to run.
  const int nt = omp_get_max_threads();
  std::vector<double> partial(static_cast<size_t>(nt), 0.0);
#pragma omp parallel num_threads(nt)
  {
    double s = 0.0;
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    partial[static_cast<size_t>(omp_get_thread_num())] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace zt::cpu
