#include <cstddef>

#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* o = out + (static_cast<size_t>(b) * T + t) * C;
      const float* e = wte + static_cast<size_t>(inp[b * T + t]) * C;
      const float* p = wpe + static_cast<size_t>(t) * C;
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C) {
  // Rows of dwte can repeat across positions, so split by channel rather than by position: each
  // thread owns a column range of both tables and no two threads touch the same float.
#pragma omp parallel for schedule(static)
  for (int c0 = 0; c0 < C; c0 += 64) {
    const int c1 = c0 + 64 < C ? c0 + 64 : C;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const float* d = dout + (static_cast<size_t>(b) * T + t) * C;
        if (dwte) {
          float* e = dwte + static_cast<size_t>(inp[b * T + t]) * C;
          for (int c = c0; c < c1; ++c) e[c] += d[c];
        }
        if (dwpe) {
          float* p = dwpe + static_cast<size_t>(t) * C;
          for (int c = c0; c < c1; ++c) p[c] += d[c];
        }
      }
  }
}

}  // namespace zt::cpu
