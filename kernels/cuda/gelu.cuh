// GELU, tanh approximation, and its derivative in f32: the formulas of cpu::gelu_forward and
// cpu::gelu_backward, shared by the elementwise kernels and the matmul backward's fused dGELU.
#pragma once

#include <cuda_runtime.h>

namespace zt::cuda {

inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluCube = 0.044715f;

__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCube * x * x * x)));
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float t = tanhf(kGeluScale * (x + kGeluCube * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
}

}  // namespace zt::cuda
