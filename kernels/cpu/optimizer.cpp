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
  // Each thread sums one contiguous slice in kLanes independent double accumulators (a plain
  // loop's sum is one chain of dependent adds, which the compiler may not reorder: 3.5x slower
  // here, 105 ms against 30 for GPT-2 124M's gradients), and the partials are added in thread
  // order: the norm repeats bit for bit run to run for a given thread count.
  constexpr size_t kLanes = 16;
  const int nt = omp_get_max_threads();
  std::vector<double> partial(static_cast<size_t>(nt), 0.0);
#pragma omp parallel num_threads(nt)
  {
    const auto t = static_cast<size_t>(omp_get_thread_num());
    const size_t per = n / static_cast<size_t>(nt) / kLanes * kLanes;
    const size_t lo = t * per, hi = t + 1 == static_cast<size_t>(nt) ? n : lo + per;
    double acc[kLanes] = {};
    size_t i = lo;
    for (; i + kLanes <= hi; i += kLanes)
      for (size_t j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
    double s = 0.0;
    for (; i < hi; ++i) s += static_cast<double>(x[i]) * x[i];
    for (double a : acc) s += a;
    partial[t] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace zt::cpu
