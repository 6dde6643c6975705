// What the attention files share (kernels/cuda/attention*.cu): the checked sizes, and the
// launchers behind the public ops of kernels.hpp. Legend: B batch, T sequence, C channels, NH
// heads, hs = C/NH the head size; qkv (B,T,3C), out and dout (B,T,C), lse and D (B,NH,T).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/kernels.hpp"

namespace zt::cuda::attn {

struct Dims {
  int B, T, C, NH, hs;
  float scale;  // 1/sqrt(hs)
};

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// What the backward kernels take (by value): dqkv (B,T,3C) += from dout (B,T,C), qkv, the
// forward's lse and D = rowsum(dout * out) (B,NH,T).
template <class S> struct BackwardArgs {
  S* dqkv;
  const S* dout;
  const S* qkv;
  const float* lse;
  const float* D;
  int T, C, NH, hs;
  float scale;
};

// Kernels that want more than the default 48 KiB of dynamic shared memory must say so first.
template <class Kernel> void allow_smem(Kernel* kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
          "cudaFuncSetAttribute(attention)");
}

// f32: plain FMA kernels (attention_fma.cu), the reference-precision path.
void forward_fma(float* out, float* lse, const float* qkv, const Dims& d, cudaStream_t s);
void backward_fma(const BackwardArgs<float>& a, const Dims& d, cudaStream_t s);

// bf16: tensor cores (attention_mma_forward.cu, attention_mma_backward.cu). Every pointer 16-byte
// aligned (the callers check).
void forward_mma(bf16* out, float* lse, const bf16* qkv, const Dims& d, cudaStream_t s);
void backward_mma(const BackwardArgs<bf16>& a, const Dims& d, cudaStream_t s);

}  // namespace zt::cuda::attn
