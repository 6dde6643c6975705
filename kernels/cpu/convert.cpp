#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

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

void cast(void* out, DType to, const void* in, DType from, size_t n) {
  if (n == 0) return;  // empty buffers may be null, which memcpy may not be given even for 0 bytes
  if (to == from && (to == DType::f32 || to == DType::bf16 || to == DType::f16)) {
    std::memcpy(out, in, n * dtype_size(to));
    return;
  }
  auto* f_out = static_cast<float*>(out);
  auto* h_out = static_cast<uint16_t*>(out);
  const auto* f_in = static_cast<const float*>(in);
  const auto* h_in = static_cast<const uint16_t*>(in);
  if (from == DType::f32 && to == DType::bf16) return f32_to_bf16(h_out, f_in, n);
  if (from == DType::f32 && to == DType::f16) return f32_to_f16(h_out, f_in, n);
  if (from == DType::bf16 && to == DType::f32) return bf16_to_f32(f_out, h_in, n);
  if (from == DType::f16 && to == DType::f32) return f16_to_f32(f_out, h_in, n);
  throw std::invalid_argument("cast: no conversion from " + std::string(dtype_name(from)) + " to " +
                              std::string(dtype_name(to)));
}

bool any_nonfinite(const float* x, size_t n) {
  bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad)
  for (size_t i = 0; i < n; ++i) bad = bad || !std::isfinite(x[i]);
  return bad;
}

}  // namespace zt::cpu
