#include <cstddef>

#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                     int row0, int rows) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* o = out + (static_cast<size_t>(b) * T + t) * C;
      const int r = inp[b * T + t] - row0;
      const float* e = wte && r >= 0 && r < rows ? wte + static_cast<size_t>(r) * C : nullptr;
      const float* p = wpe ? wpe + static_cast<size_t>(t) * C : nullptr;
      if (e && p)
        for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
      else if (e || p)
        for (int c = 0; c < C; ++c) o[c] = (e ? e : p)[c];
      else
        for (int c = 0; c < C; ++c) o[c] = 0.0f;
    }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C, int row0,
                      int rows) {
  // Rows of dwte can repeat across positions, so split by channel rather than by position: each
  // thread owns a column range of both tables and no two threads touch the same float.
#pragma omp parallel for schedule(static)
  for (int c0 = 0; c0 < C; c0 += 64) {
    const int c1 = c0 + 64 < C ? c0 + 64 : C;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const float* d = dout + (static_cast<size_t>(b) * T + t) * C;
        const int r = inp[b * T + t] - row0;
        if (dwte && r >= 0 && r < rows) {
          float* e = dwte + static_cast<size_t>(r) * C;
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
