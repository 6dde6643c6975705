// Fused softmax cross-entropy over a padded vocabulary: logits (N,Vp), classes [0,V). Twins of
// kernels/cpu/crossentropy.cpp with one part (K = 1). One block per row.
//
// The forward reads each logit once: every thread keeps a running (max, sum of exp(x - max)) over
// its columns, rescaling the sum when the max grows (online softmax), and the block combines the
// threads' pairs. The backward writes scale * (softmax - onehot) over the logits, 0 in [V,Vp)
// and on ignored rows (which it does not read).
#include <cmath>

#include "kernels/cuda/vec.cuh"

namespace zt::cuda {

namespace {

constexpr unsigned kThreads = 256;

// Running max m and sum s of exp(x - m); the empty set is (-inf, 0). (No default member
// initialisers: a __shared__ array of it must be trivially constructible.)
struct MaxSum {
  float m;
  float s;

  __device__ static MaxSum empty() { return {-INFINITY, 0.0f}; }

  __device__ void add(float x) {
    if (x > m) {
      s = s * expf(m - x) + 1.0f;  // m = -inf: s = 0, expf(-inf) = 0
      m = x;
    } else if (x != -INFINITY) {  // skips exp(-inf - -inf) = NaN; a NaN x still poisons s
      s += expf(x - m);
    }
  }
  __device__ static MaxSum combine(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return a;
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
  }
};

__device__ MaxSum block_max_sum(MaxSum x) {
  __shared__ MaxSum warps[32];
  for (int o = 16; o > 0; o >>= 1)
    x = MaxSum::combine(x, {__shfl_xor_sync(0xffffffffu, x.m, o), __shfl_xor_sync(0xffffffffu, x.s, o)});
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = x;
  __syncthreads();
  MaxSum total = MaxSum::empty();
  for (unsigned w = 0; w < blockDim.x / 32; ++w) total = MaxSum::combine(total, warps[w]);
  return total;
}

template <int W, class T>
__global__ void __launch_bounds__(kThreads)
    crossentropy_forward_kernel(float* losses, float* lse, const T* logits, const int32_t* targets, int V, int Vp,
                                int ignore_index) {
  const int row = int(blockIdx.x);
  const T* x = logits + size_t(row) * Vp;
  const int whole = V / W * W;  // columns in whole packs; the rest of [0,V) one at a time
  MaxSum ms = MaxSum::empty();
  for (int c = int(threadIdx.x) * W; c < whole; c += int(blockDim.x) * W) {
    float v[W];
    load_f32<W>(v, x + c);
#pragma unroll
    for (int j = 0; j < W; ++j) ms.add(v[j]);
  }
  for (int c = whole + int(threadIdx.x); c < V; c += int(blockDim.x)) ms.add(to_f32(x[c]));
  ms = block_max_sum(ms);
  if (threadIdx.x != 0) return;
  const float l = ms.m + logf(ms.s);
  const int t = targets[row];
  lse[row] = l;
  losses[row] = t == ignore_index ? 0.0f : t >= 0 && t < V ? l - to_f32(x[t]) : NAN;
}

template <int W, class T>
__global__ void __launch_bounds__(kThreads)
    crossentropy_backward_kernel(T* logits, const float* lse, const int32_t* targets, float scale, int V, int Vp,
                                 int ignore_index) {
  const int row = int(blockIdx.x);
  T* x = logits + size_t(row) * Vp;
  const int t = targets[row];
  const bool counted = t != ignore_index;
  const float l = lse[row];
  for (int c = int(threadIdx.x) * W; c < Vp; c += int(blockDim.x) * W) {
    float v[W] = {};
    if (counted && c < V) load_f32<W>(v, x + c);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const bool live = counted && c + j < V;  // a target outside [0,V) matches no live column
      v[j] = live ? expf(v[j] - l) * scale : 0.0f;
      if (live && c + j == t) v[j] -= scale;
    }
    store_f32<W>(x + c, v);
  }
}

// 16-byte packs where Vp and the logits allow them, single elements otherwise.
template <class T>
bool packs_fit(int Vp, const T* logits) {
  return Vp % Pack<T>::n == 0 && aligned16(logits);
}

}  // namespace

template <class T>
void crossentropy_forward(float* losses, float* lse, const T* logits, const int32_t* targets, int N, int V, int Vp,
                          int ignore_index, cudaStream_t s) {
  if (N == 0) return;
  const auto kernel =
      packs_fit(Vp, logits) ? crossentropy_forward_kernel<Pack<T>::n, T> : crossentropy_forward_kernel<1, T>;
  kernel<<<unsigned(N), kThreads, 0, s>>>(losses, lse, logits, targets, V, Vp, ignore_index);
  check_launch("crossentropy_forward");
}

template <class T>
void crossentropy_backward(T* logits, const float* lse, const int32_t* targets, float scale, int N, int V, int Vp,
                           int ignore_index, cudaStream_t s) {
  if (N == 0) return;
  const auto kernel =
      packs_fit(Vp, logits) ? crossentropy_backward_kernel<Pack<T>::n, T> : crossentropy_backward_kernel<1, T>;
  kernel<<<unsigned(N), kThreads, 0, s>>>(logits, lse, targets, scale, V, Vp, ignore_index);
  check_launch("crossentropy_backward");
}

#define ZT_INSTANTIATE(T)                                                                                            \
  template void crossentropy_forward<T>(float*, float*, const T*, const int32_t*, int, int, int, int, cudaStream_t); \
  template void crossentropy_backward<T>(T*, const float*, const int32_t*, float, int, int, int, int, cudaStream_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(bf16)
#undef ZT_INSTANTIATE

}  // namespace zt::cuda
