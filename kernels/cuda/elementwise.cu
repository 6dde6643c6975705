// GELU and the residual add: one pass over 16-byte packs (a grid-stride loop), a scalar path for
// views that are not 16-byte aligned and for the tail. Twins of kernels/cpu/elementwise.cpp.
#include "kernels/backend.hpp"
#include "kernels/cuda/vec.cuh"
#include "kernels/cuda/gelu.cuh"

namespace zt::cuda {

namespace {

constexpr unsigned kThreads = 256;

// out[i] = op(in[0][i], ..., in[K-1][i]) for i < n, in f32. Where every pointer is 16-byte
// aligned each thread moves whole Packs (16-byte loads and stores); otherwise (views at odd
// offsets) and for the tail, single elements. `out` may be one of the inputs (accumulation).
template <class T, int K>
struct Args {
  T* out;
  const T* in[K];
};

template <bool Vector, class T, int K, class Op>
__global__ void map_kernel(Args<T, K> a, size_t n, Op op) {
  constexpr int W = Vector ? Pack<T>::n : 1;
  grid_stride<W>(
      n,
      [&](size_t i) {
        float x[K][W], y[W];
#pragma unroll
        for (int k = 0; k < K; ++k) load_f32<W>(x[k], a.in[k] + i);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          float v[K];
#pragma unroll
          for (int k = 0; k < K; ++k) v[k] = x[k][j];
          y[j] = op(v);
        }
        store_f32<W>(a.out + i, y);
      },
      [&](size_t i) {
        float v[K];
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = to_f32(a.in[k][i]);
        a.out[i] = from_f32<T>(op(v));
      });
}

template <class T, int K, class Op>
void map(Args<T, K> a, size_t n, Op op, cudaStream_t s, const char* name) {
  if (n == 0) return;
  bool vector = aligned16(a.out);
  for (int k = 0; k < K; ++k) vector = vector && aligned16(a.in[k]);
  if (vector) map_kernel<true><<<blocks_for(n / Pack<T>::n + 1, kThreads), kThreads, 0, s>>>(a, n, op);
  else map_kernel<false><<<blocks_for(n, kThreads), kThreads, 0, s>>>(a, n, op);
  check_launch(name);
}

struct GeluForward {
  __device__ float operator()(const float* v) const { return gelu(v[0]); }
};
// v: dinp, inp, dout
struct GeluBackward {
  __device__ float operator()(const float* v) const { return v[0] + v[2] * gelu_grad(v[1]); }
};
struct Sum {
  __device__ float operator()(const float* v) const { return v[0] + v[1]; }
};

}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, size_t n, cudaStream_t s) {
  map(Args<T, 1>{out, {inp}}, n, GeluForward{}, s, "gelu_forward");
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t s) {
  if (!dinp) return;
  map(Args<T, 3>{dinp, {dinp, inp, dout}}, n, GeluBackward{}, s, "gelu_backward");
}

template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n, cudaStream_t s) {
  map(Args<T, 2>{out, {a, b}}, n, Sum{}, s, "residual_forward");
}

template <class T>
void residual_backward(T* da, T* db, const T* dout, size_t n, cudaStream_t s) {
  if (da) map(Args<T, 2>{da, {da, dout}}, n, Sum{}, s, "residual_backward");
  if (db) map(Args<T, 2>{db, {db, dout}}, n, Sum{}, s, "residual_backward");
}

namespace {
// One thread per element of the n columns: out's element there gains scale * d's.
template <class T>
__global__ void add_columns_kernel(T* out, const T* d, int N, int OC, int c0, int n, float scale) {
  const size_t total = static_cast<size_t>(N) * n;
  for (size_t k = blockIdx.x * size_t{blockDim.x} + threadIdx.x; k < total; k += size_t{gridDim.x} * blockDim.x) {
    const size_t i = k / n, j = k % n, at = i * OC + c0 + j;
    out[at] = from_f32<T>(to_f32(out[at]) + scale * to_f32(d[k]));
  }
}
// dd (N,n) += scale * dout's columns [c0, c0+n).
template <class T>
__global__ void take_columns_kernel(T* dd, const T* dout, int N, int OC, int c0, int n, float scale) {
  const size_t total = static_cast<size_t>(N) * n;
  for (size_t k = blockIdx.x * size_t{blockDim.x} + threadIdx.x; k < total; k += size_t{gridDim.x} * blockDim.x) {
    const size_t i = k / n, j = k % n;
    dd[k] = from_f32<T>(to_f32(dd[k]) + scale * to_f32(dout[i * OC + c0 + j]));
  }
}
}  // namespace

template <class T>
void add_columns_forward(T* out, const T* y, const T* d, int N, int OC, int c0, int n, float scale, cudaStream_t s) {
  const size_t all = static_cast<size_t>(N) * OC, part = static_cast<size_t>(N) * n;
  if (out != y && all) {
    check(cudaMemcpyAsync(out, y, all * sizeof(T), cudaMemcpyDeviceToDevice, s), "add_columns_forward: copy");
  }
  if (part == 0) return;
  add_columns_kernel<T><<<blocks_for(part, kThreads), kThreads, 0, s>>>(out, d, N, OC, c0, n, scale);
  check_launch("add_columns_forward");
}

template <class T>
void add_columns_backward(T* dy, T* dd, const T* dout, int N, int OC, int c0, int n, float scale, cudaStream_t s) {
  if (dy) residual_backward<T>(dy, nullptr, dout, static_cast<size_t>(N) * OC, s);
  const size_t part = static_cast<size_t>(N) * n;
  if (!dd || part == 0) return;
  take_columns_kernel<T><<<blocks_for(part, kThreads), kThreads, 0, s>>>(dd, dout, N, OC, c0, n, scale);
  check_launch("add_columns_backward");
}

namespace {
template <class T, bool Backward>
__global__ void dropout_kernel(T* out, const T* in, size_t n, DropoutMask m) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const bool keep = dropout_keeps(m, i);
    if (Backward) {
      if (keep) out[i] = from_f32<T>(to_f32(out[i]) + to_f32(in[i]) * m.scale);
    } else {
      out[i] = from_f32<T>(keep ? to_f32(in[i]) * m.scale : 0.0f);
    }
  }
}
}  // namespace

template <class T>
void dropout_forward(T* out, const T* x, size_t n, uint64_t seed, uint32_t threshold, float scale, cudaStream_t s) {
  if (n == 0) return;
  dropout_kernel<T, false><<<blocks_for(n, kThreads), kThreads, 0, s>>>(out, x, n, DropoutMask{seed, threshold, scale});
  check_launch("dropout_forward");
}

template <class T>
void dropout_backward(T* dx, const T* dout, size_t n, uint64_t seed, uint32_t threshold, float scale, cudaStream_t s) {
  if (n == 0 || !dx) return;
  dropout_kernel<T, true><<<blocks_for(n, kThreads), kThreads, 0, s>>>(dx, dout, n, DropoutMask{seed, threshold, scale});
  check_launch("dropout_backward");
}

#define ZT_INSTANTIATE(T)                                                              \
  template void dropout_forward<T>(T*, const T*, size_t, uint64_t, uint32_t, float, cudaStream_t);  \
  template void dropout_backward<T>(T*, const T*, size_t, uint64_t, uint32_t, float, cudaStream_t); \
  template void add_columns_forward<T>(T*, const T*, const T*, int, int, int, int, float, cudaStream_t);  \
  template void add_columns_backward<T>(T*, T*, const T*, int, int, int, int, float, cudaStream_t);       \
  template void gelu_forward<T>(T*, const T*, size_t, cudaStream_t);                   \
  template void gelu_backward<T>(T*, const T*, const T*, size_t, cudaStream_t);        \
  template void residual_forward<T>(T*, const T*, const T*, size_t, cudaStream_t);     \
  template void residual_backward<T>(T*, T*, const T*, size_t, cudaStream_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(bf16)
#undef ZT_INSTANTIATE

}  // namespace zt::cuda
