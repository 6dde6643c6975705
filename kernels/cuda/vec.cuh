// What the row kernels share beyond common.cuh: W consecutive elements moved as one access
// (W = Pack<T>::n: 16 bytes; W = 1: the scalar path for widths and views the packs do not fit),
// converted to and from f32, and block-wide reductions in a fixed order (so that sums repeat bit
// for bit run to run).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

// W elements of T in one load or store of W * sizeof(T) bytes (at most 16).
template <int W, class T>
struct alignas(W * sizeof(T)) Vec {
  static_assert(W * sizeof(T) <= 16, "one access moves at most 16 bytes");
  T v[W];
};

template <int W, class T>
__device__ __forceinline__ void load_f32(float (&f)[W], const T* p) {
  const Vec<W, T> x = *reinterpret_cast<const Vec<W, T>*>(p);
#pragma unroll
  for (int j = 0; j < W; ++j) f[j] = to_f32(x.v[j]);
}

template <int W, class T>
__device__ __forceinline__ void store_f32(T* p, const float (&f)[W]) {
  Vec<W, T> x;
#pragma unroll
  for (int j = 0; j < W; ++j) x.v[j] = from_f32<T>(f[j]);
  *reinterpret_cast<Vec<W, T>*>(p) = x;
}

// A grid-stride pass over [0, n) shared by this thread's block: packs(i) for each whole run of W
// elements starting at i (W > 1: the 16-byte path), then single(i) for each element left over.
template <int W, class Packs, class Single>
__device__ __forceinline__ void grid_stride(size_t n, Packs&& packs, Single&& single) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t first = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if constexpr (W > 1) {
    const size_t whole = n / W;
    for (size_t q = first; q < whole; q += stride) packs(q * W);
    first += whole * W;
  }
  for (size_t i = first; i < n; i += stride) single(i);
}

// x as T stores it, back in f32 (what a later load of a stored x gives).
template <class T>
__device__ __forceinline__ float round_to(float x) {
  return to_f32(from_f32<T>(x));
}

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

__device__ __forceinline__ double warp_sum(double x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The sum of x over the block, returned to every thread. blockDim.x is a multiple of 32; every
// thread of the block calls it. The warps' sums are added in warp order, so the result does not
// depend on scheduling. Two barriers: the buffer may be reused by the next call.
template <class F>
__device__ __forceinline__ F block_sum(F x) {
  __shared__ F warps[32];
  x = warp_sum(x);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = x;
  __syncthreads();
  F total = 0;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) total += warps[w];
  __syncthreads();
  return total;
}

}  // namespace zt::cuda
