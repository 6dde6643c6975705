#include <cmath>
#include <cstddef>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

int crossentropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets, int N, int V,
                         int Vp, int ignore_index) {
  int counted = 0;
#pragma omp parallel for schedule(static) reduction(+ : counted)
  for (int i = 0; i < N; ++i) {
    ConstArrayMap row(logits + static_cast<size_t>(i) * Vp, V);
    const float mx = row.maxCoeff();
    lse[i] = mx + std::log((row - mx).exp().sum());
    if (targets[i] == ignore_index) {
      losses[i] = 0.0f;
    } else {
      losses[i] = lse[i] - row[targets[i]];
      ++counted;
    }
  }
  return counted;
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           float scale, int N, int V, int Vp, int ignore_index) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    ArrayMap d(dlogits + static_cast<size_t>(i) * Vp, Vp);
    if (targets[i] == ignore_index) {
      d.setZero();
      continue;
    }
    // logits and dlogits may be the same memory: read each element before writing it.
    ConstArrayMap row(logits + static_cast<size_t>(i) * Vp, V);
    d.head(V) = ((row - lse[i]).exp()) * scale;
    d.tail(Vp - V).setZero();
    d[targets[i]] -= scale;
  }
}

}  // namespace zt::cpu
