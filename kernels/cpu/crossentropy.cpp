#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

// Row i's logits are K segments, one per part; the class columns of part k are the first
// valid(k) of its R (the rest are padding).
int crossentropy_forward(float* losses, float* lse, const float* const* parts, int K, const int32_t* targets, int N,
                         int V, int Vp, int ignore_index) {
  const int R = Vp / K;
  auto valid = [&](int k) { return std::clamp(V - k * R, 0, R); };
  int counted = 0;
#pragma omp parallel for schedule(static) reduction(+ : counted)
  for (int i = 0; i < N; ++i) {
    auto seg = [&](int k) { return ConstArrayMap(parts[k] + static_cast<size_t>(i) * R, valid(k)); };
    float mx = -std::numeric_limits<float>::infinity();
    for (int k = 0; k < K && valid(k); ++k) mx = std::max(mx, seg(k).maxCoeff());
    float sum = 0.0f;
    for (int k = 0; k < K && valid(k); ++k) sum += (seg(k) - mx).exp().sum();
    lse[i] = mx + std::log(sum);
    if (targets[i] == ignore_index) {
      losses[i] = 0.0f;
    } else {
      losses[i] = lse[i] - parts[targets[i] / R][static_cast<size_t>(i) * R + targets[i] % R];
      ++counted;
    }
  }
  return counted;
}

void crossentropy_backward(float* const* parts, int K, const float* lse, const int32_t* targets, float scale, int N,
                           int V, int Vp, int ignore_index) {
  const int R = Vp / K;
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    for (int k = 0; k < K; ++k) {
      ArrayMap d(parts[k] + static_cast<size_t>(i) * R, R);
      const int n = targets[i] == ignore_index ? 0 : std::clamp(V - k * R, 0, R);
      d.head(n) = (d.head(n) - lse[i]).exp() * scale;  // each element read before it is written
      d.tail(R - n).setZero();
    }
    if (targets[i] != ignore_index) parts[targets[i] / R][static_cast<size_t>(i) * R + targets[i] % R] -= scale;
  }
}

}  // namespace zt::cpu
