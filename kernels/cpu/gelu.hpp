// GELU, tanh approximation, as Eigen array expressions over f32: the one formula of gelu's
// kernels (elementwise.cpp) and GeGLU's (llama_ops.cpp), the CPU side of kernels/cuda/gelu.cuh.
// Each returns an expression, evaluated where it is assigned (its arguments are maps and arrays
// the caller keeps, held by value and by reference respectively).
#pragma once

#include "kernels/cpu/eigen_maps.hpp"

namespace zt::cpu {

inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluCube = 0.044715f;

// tanh(sqrt(2/pi) (x + 0.044715 x^3)), the part gelu and its derivative share.
template <class X>
auto gelu_tanh(const X& x) {
  return (kGeluScale * (x + kGeluCube * x.cube())).tanh();
}
// 0.5 x (1 + tanh(...)).
template <class X>
auto gelu(const X& x) {
  return 0.5f * x * (1.0f + gelu_tanh(x));
}
// d gelu / dx from x and t = gelu_tanh(x).
template <class X, class Tanh>
auto gelu_grad(const X& x, const Tanh& t) {
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t.square()) * kGeluScale * (1.0f + 3.0f * kGeluCube * x.square());
}

}  // namespace zt::cpu
