#include <cstddef>

#include "kernels/cpu/kernels.hpp"
#include "tensor/dtype.hpp"

namespace zt::cpu {

void f32_to_bf16(uint16_t* out, const float* in, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = zt::f32_to_bf16(in[i]);
}

void bf16_to_f32(float* out, const uint16_t* in, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = zt::bf16_to_f32(in[i]);
}

void f32_to_f16(uint16_t* out, const float* in, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = zt::f32_to_f16(in[i]);
}

void f16_to_f32(float* out, const uint16_t* in, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = zt::f16_to_f32(in[i]);
}

}  // namespace zt::cpu
