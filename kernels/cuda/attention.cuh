// What the attention files share (kernels/cuda/attention*.cu): the checked sizes, and the
// launchers behind the public ops of kernels.hpp. Legend: B batch, T sequence, NH query heads,
// NKV key/value heads (NH % NKV == 0), hs the head size, C = NH*hs; qkv (B,T,(NH+2*NKV)*hs), out
// and dout (B,T,C), lse and D (B,NH,T). Query t sees the keys s with t - window < s <= t ([Note:
// sliding window] in kernels/attention_options.hpp; window = T without one), so a key tile before
// the window of every row of a query tile is skipped, and a row's scores are masked on both edges.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/kernels.hpp"

namespace zt::cuda::attn {

// Where the heads sit in qkv: each row holds the NH query heads, then the NKV key heads, then
// the NKV value heads; query head h reads kv head h / (NH/NKV). Offsets in elements of row (b, 0).
struct Heads {
  int T, NH, NKV, hs;
  __host__ __device__ size_t ld() const { return size_t(NH + 2 * NKV) * hs; }
  __host__ __device__ int group() const { return NH / NKV; }
  __host__ __device__ int kv_of(int h) const { return h / group(); }
  __host__ __device__ size_t q(int b, int h) const { return size_t(b) * T * ld() + size_t(h) * hs; }
  __host__ __device__ size_t k(int b, int kv) const { return size_t(b) * T * ld() + size_t(NH + kv) * hs; }
  __host__ __device__ size_t v(int b, int kv) const { return k(b, kv) + size_t(NKV) * hs; }
};

struct Dims {
  int B, T, C, NH, NKV, hs;
  float scale;  // attention_scale: 1/sqrt(hs) unless the caller gave one
  int window;   // attention_window: 1..T
  Heads heads() const { return {T, NH, NKV, hs}; }
};

// The first key of a window of `window` keys ending at query row `row` (0 where it reaches back
// past the start).
__host__ __device__ inline int window_start(int row, int window) { return row - window + 1 > 0 ? row - window + 1 : 0; }

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// What the backward kernels take (by value): dqkv += from dout (B,T,C), qkv, the forward's lse
// and D = rowsum(dout * out) (B,NH,T).
template <class S> struct BackwardArgs {
  S* dqkv;
  const S* dout;
  const S* qkv;
  const float* lse;
  const float* D;
  Heads L;
  int C;
  float scale;
  int window;
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
