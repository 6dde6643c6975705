// The optimizer over one flat shard: AdamW, the sum of squares for the global gradient norm, and
// the inf/NaN check. Twins of kernels/cpu/optimizer.cpp and cpu::any_nonfinite. Elementwise
// passes move 4 elements per access (16 bytes of each f32 array) where every pointer allows it,
// and single elements otherwise and for the tail.
#include <cmath>

#include "kernels/cuda/vec.cuh"

namespace zt::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kW = 4;  // elements per access

// The per-step constants, computed on the host exactly as the CPU twin computes them.
struct AdamW {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, decay, step, bc2_sqrt, grad_scale;
};

// One element. torch.optim.AdamW's operations in its order, each rounded on its own (the _rn
// intrinsics forbid fusing a multiply into an add), as the CPU twin's loop rounds them.
__device__ __forceinline__ void adamw_element(float& p, float g, float& m, float& v, const AdamW& k) {
  g = __fmul_rn(g, k.grad_scale);
  m = __fadd_rn(__fmul_rn(k.beta1, m), __fmul_rn(k.one_minus_beta1, g));
  v = __fadd_rn(__fmul_rn(k.beta2, v), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.bc2_sqrt), k.eps);
  p = __fsub_rn(__fmul_rn(p, k.decay), __fdiv_rn(__fmul_rn(k.step, m), denom));
}

template <bool Vector, class T>
__global__ void adamw_kernel(float* master, T* params, const T* grads, float* m, float* v, size_t n, AdamW k) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t first = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if constexpr (Vector) {
    const size_t packs = n / kW;
    for (size_t q = first; q < packs; q += stride) {
      const size_t i = q * kW;
      float p[kW], g[kW], mi[kW], vi[kW];
      load_f32<kW>(p, master + i);
      load_f32<kW>(g, grads + i);
      load_f32<kW>(mi, m + i);
      load_f32<kW>(vi, v + i);
#pragma unroll
      for (int j = 0; j < kW; ++j) adamw_element(p[j], g[j], mi[j], vi[j], k);
      store_f32<kW>(master + i, p);
      store_f32<kW>(m + i, mi);
      store_f32<kW>(v + i, vi);
      if (params) store_f32<kW>(params + i, p);
    }
    first += packs * kW;
  }
  for (size_t i = first; i < n; i += stride) {
    float p = master[i], mi = m[i], vi = v[i];
    adamw_element(p, to_f32(grads[i]), mi, vi, k);
    master[i] = p;
    m[i] = mi;
    v[i] = vi;
    if (params) params[i] = from_f32<T>(p);
  }
}

// Calls f(x[i] in f32) for each element this thread visits in a grid-stride pass over x[0..n):
// whole 16-byte packs where Vector, then the tail one at a time.
template <bool Vector, class T, class F>
__device__ __forceinline__ void for_each_f32(const T* x, size_t n, F&& f) {
  constexpr int W = Vector ? Pack<T>::n : 1;
  grid_stride<W>(
      n,
      [&](size_t i) {
        float v[W];
        load_f32<W>(v, x + i);
#pragma unroll
        for (int j = 0; j < W; ++j) f(v[j]);
      },
      [&](size_t i) { f(to_f32(x[i])); });
}

// partial[block] = the block's sum of x^2 in double, over a grid of kSumSquaresScratch blocks.
template <bool Vector, class T>
__global__ void __launch_bounds__(kThreads) sum_squares_kernel(double* partial, const T* x, size_t n) {
  double acc = 0.0;
  for_each_f32<Vector>(x, n, [&](float v) { acc += double(v) * v; });
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// *out += the partials' sum; one block of kSumSquaresScratch threads.
__global__ void sum_partials_kernel(double* out, const double* partial) {
  const double total = block_sum(partial[threadIdx.x]);
  if (threadIdx.x == 0) *out += total;
}

template <bool Vector, class T>
__global__ void __launch_bounds__(kThreads) any_nonfinite_kernel(int* flag, const T* x, size_t n) {
  bool bad = false;
  for_each_f32<Vector>(x, n, [&](float v) { bad = bad || !isfinite(v); });
  // Every lane reaches the vote (the pass has no early exit); one store per warp at most.
  if (__any_sync(0xffffffffu, bad) && threadIdx.x % 32 == 0) *flag = 1;
}

}  // namespace

template <class T>
void adamw_update(float* master, T* params, const T* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int t, float grad_scale, cudaStream_t s) {
  if (n == 0) return;
  // As cpu::adamw_update computes them.
  const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(t));
  const float bc2_sqrt = std::sqrt(1.0f - std::pow(beta2, static_cast<float>(t)));
  const AdamW k{.beta1 = beta1,
                .one_minus_beta1 = 1.0f - beta1,
                .beta2 = beta2,
                .one_minus_beta2 = 1.0f - beta2,
                .eps = eps,
                .decay = 1.0f - lr * weight_decay,
                .step = lr / bc1,
                .bc2_sqrt = bc2_sqrt,
                .grad_scale = grad_scale};
  constexpr size_t kLow = kW * sizeof(T);  // bytes of one access of grads and params
  if (aligned16(master) && aligned16(m) && aligned16(v) && aligned_to(grads, kLow) && aligned_to(params, kLow))
    adamw_kernel<true><<<blocks_for(n / kW + 1, kThreads), kThreads, 0, s>>>(master, params, grads, m, v, n, k);
  else
    adamw_kernel<false><<<blocks_for(n, kThreads), kThreads, 0, s>>>(master, params, grads, m, v, n, k);
  check_launch("adamw_update");
}

template <class T>
void sum_squares(double* out, const T* x, size_t n, double* scratch, cudaStream_t s) {
  if (n == 0) return;
  // A grid of fixed size whatever n is: the same n always adds the same partials in the same order.
  if (aligned16(x))
    sum_squares_kernel<true><<<unsigned(kSumSquaresScratch), kThreads, 0, s>>>(scratch, x, n);
  else
    sum_squares_kernel<false><<<unsigned(kSumSquaresScratch), kThreads, 0, s>>>(scratch, x, n);
  check_launch("sum_squares");
  sum_partials_kernel<<<1, unsigned(kSumSquaresScratch), 0, s>>>(out, scratch);
  check_launch("sum_squares (partials)");
}

template <class T>
void any_nonfinite(int* flag, const T* x, size_t n, cudaStream_t s) {
  if (n == 0) return;
  if (aligned16(x))
    any_nonfinite_kernel<true><<<blocks_for(n / Pack<T>::n + 1, kThreads), kThreads, 0, s>>>(flag, x, n);
  else
    any_nonfinite_kernel<false><<<blocks_for(n, kThreads), kThreads, 0, s>>>(flag, x, n);
  check_launch("any_nonfinite");
}

#define ZT_INSTANTIATE(T)                                                                                             \
  template void adamw_update<T>(float*, T*, const T*, float*, float*, size_t, float, float, float, float, float, int, \
                                float, cudaStream_t);                                                                 \
  template void sum_squares<T>(double*, const T*, size_t, double*, cudaStream_t);                                     \
  template void any_nonfinite<T>(int*, const T*, size_t, cudaStream_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(bf16)
#undef ZT_INSTANTIATE

}  // namespace zt::cuda
