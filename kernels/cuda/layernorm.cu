// Layer normalisation over the rows of (N,C), and the residual add fused in front of it. Twins of
// kernels/cpu/layernorm.cpp: the same two-pass statistics (mean, then the mean squared deviation)
// in f32, and the same eps.
//
// Forward: one warp per row, three passes over the row (sum, squared deviations, output); the
// second and third hit L1. Backward: one block per group of rows (row g, g+G, g+2G, ...), each
// thread owning fixed channel packs, so that the block's dweight/dbias partial sums need no
// atomics: each thread adds its own channels row after row in shared memory. The G partials go
// to `scratch` and a second kernel adds them in block order: the sums repeat bit for bit.
// The vector path moves 16-byte packs and needs C % Pack<T>::n == 0 and 16-byte aligned rows;
// anything else takes the scalar path.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/vec.cuh"

namespace zt::cuda {

namespace {

constexpr float kEps = 1e-5f;         // GPT-2's
constexpr int kRowsPerBlock = 8;      // forward: one warp each
constexpr int kBackwardBlocks = 512;  // G, at most: per-block partials of dweight and dbias
constexpr int kMaxBackwardThreads = 512;

// Rows of x: inp, or (Fused) residual = a + b, written here and read back by the same thread.
template <int W, bool Fused, class T>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    layernorm_forward_kernel(T* out, float* mean, float* rstd, T* residual, const T* inp, const T* b, const T* weight,
                             const T* bias, int N, int C) {
  const int row = int(blockIdx.x) * kRowsPerBlock + int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  if (row >= N) return;  // whole warps leave together
  const size_t off = size_t(row) * C;
  const T* x = (Fused ? residual : inp) + off;
  float sum = 0.0f;
  for (int c = lane * W; c < C; c += 32 * W) {
    float v[W];
    load_f32<W>(v, inp + off + c);
    if constexpr (Fused) {
      float w[W];
      load_f32<W>(w, b + off + c);
#pragma unroll
      for (int j = 0; j < W; ++j) v[j] = round_to<T>(v[j] + w[j]);
      store_f32<W>(residual + off + c, v);
    }
#pragma unroll
    for (int j = 0; j < W; ++j) sum += v[j];
  }
  const float m = warp_sum(sum) / C;
  float var = 0.0f;
  for (int c = lane * W; c < C; c += 32 * W) {
    float v[W];
    load_f32<W>(v, x + c);
#pragma unroll
    for (int j = 0; j < W; ++j) var += (v[j] - m) * (v[j] - m);
  }
  const float s = 1.0f / sqrtf(warp_sum(var) / C + kEps);
  for (int c = lane * W; c < C; c += 32 * W) {
    float v[W], w[W], bi[W];
    load_f32<W>(v, x + c);
    load_f32<W>(w, weight + c);
    load_f32<W>(bi, bias + c);
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = (v[j] - m) * s * w[j] + bi[j];
    store_f32<W>(out + off + c, v);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// partial (G, 2C): block g's sums of norm*dout (dweight) then dout (dbias) over its rows; null
// when neither is wanted. Dynamic shared memory: 2C floats, the same sums in progress.
template <int W, class T>
__global__ void layernorm_backward_kernel(T* dinp, float* partial, const T* dout, const T* inp, const T* weight,
                                          const float* mean, const float* rstd, int N, int C) {
  extern __shared__ float sums[];
  __shared__ float row_sums[2][2][32];  // [row parity][dnorm, dnorm*norm][warp]
  const int packs = C / W, warps = int(blockDim.x / 32);
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  if (partial)
    for (int c = int(threadIdx.x) * W; c < C; c += int(blockDim.x) * W)
#pragma unroll
      for (int j = 0; j < W; ++j) sums[c + j] = sums[C + c + j] = 0.0f;
  int parity = 0;
  for (int row = int(blockIdx.x); row < N; row += int(gridDim.x), parity ^= 1) {
    const size_t off = size_t(row) * C;
    const float m = mean[row], s = rstd[row];
    float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
    for (int p = int(threadIdx.x); p < packs; p += int(blockDim.x)) {
      const int c = p * W;
      float x[W], d[W], w[W];
      load_f32<W>(x, inp + off + c);
      load_f32<W>(d, dout + off + c);
      load_f32<W>(w, weight + c);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float norm = (x[j] - m) * s, dnorm = w[j] * d[j];
        dnorm_sum += dnorm;
        dnorm_norm_sum += dnorm * norm;
        if (partial) {
          sums[c + j] += norm * d[j];
          sums[C + c + j] += d[j];
        }
      }
    }
    if (!dinp) continue;  // the same for the whole block
    // The row's two sums over the block. The buffer alternates with the row's parity, so one
    // barrier per row suffices: a warp writing row r+2's sums has passed row r+1's barrier,
    // which every warp reaches only after reading row r's.
    dnorm_sum = warp_sum(dnorm_sum);
    dnorm_norm_sum = warp_sum(dnorm_norm_sum);
    if (lane == 0) {
      row_sums[parity][0][warp] = dnorm_sum;
      row_sums[parity][1][warp] = dnorm_norm_sum;
    }
    __syncthreads();
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int k = 0; k < warps; ++k) {
      dnorm_mean += row_sums[parity][0][k];
      dnorm_norm_mean += row_sums[parity][1][k];
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    for (int p = int(threadIdx.x); p < packs; p += int(blockDim.x)) {
      const int c = p * W;
      float x[W], d[W], w[W], di[W];
      load_f32<W>(x, inp + off + c);
      load_f32<W>(d, dout + off + c);
      load_f32<W>(w, weight + c);
      load_f32<W>(di, dinp + off + c);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float norm = (x[j] - m) * s;
        di[j] += (w[j] * d[j] - dnorm_mean - norm * dnorm_norm_mean) * s;
      }
      store_f32<W>(dinp + off + c, di);
    }
  }
  if (partial) {
    float* out = partial + size_t(blockIdx.x) * 2 * C;
    for (int c = int(threadIdx.x) * W; c < C; c += int(blockDim.x) * W)
#pragma unroll
      for (int j = 0; j < W; ++j) {
        out[c + j] = sums[c + j];
        out[C + c + j] = sums[C + c + j];
      }
  }
}

// dweight[c] += sum over g of partial[g][c], dbias[c] += sum of partial[g][C + c], in g order.
template <class T>
__global__ void layernorm_params_kernel(T* dweight, T* dbias, const float* partial, int G, int C) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int g = 0; g < G; ++g) {
    dw += partial[size_t(g) * 2 * C + c];
    db += partial[size_t(g) * 2 * C + C + c];
  }
  if (dweight) dweight[c] = from_f32<T>(to_f32(dweight[c]) + dw);
  if (dbias) dbias[c] = from_f32<T>(to_f32(dbias[c]) + db);
}

int backward_blocks(int N) { return N < kBackwardBlocks ? N : kBackwardBlocks; }

// Elements per access: a 16-byte pack where C and every pointer allow it, else one.
template <class T, class... P>
int width(int C, const P*... p) {
  return C % Pack<T>::n == 0 && (aligned16(p) && ...) ? Pack<T>::n : 1;
}

template <bool Fused, class T>
void launch_forward(int w, T* out, float* mean, float* rstd, T* residual, const T* inp, const T* b, const T* weight,
                    const T* bias, int N, int C, cudaStream_t s, const char* name) {
  if (N == 0) return;
  const auto kernel = w > 1 ? layernorm_forward_kernel<Pack<T>::n, Fused, T> : layernorm_forward_kernel<1, Fused, T>;
  const unsigned blocks = unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock);
  kernel<<<blocks, kRowsPerBlock * 32, 0, s>>>(out, mean, rstd, residual, inp, b, weight, bias, N, C);
  check_launch(name);
}

// Raises the kernel's dynamic shared memory limit past the default 48 KiB where it needs more.
void allow_shared(const void* kernel, size_t bytes, int C) {
  if (bytes <= 48 * 1024) return;
  int device = 0, most = 0;
  check(cudaGetDevice(&device), "layernorm_backward");
  check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "layernorm_backward");
  if (bytes > size_t(most))
    throw std::invalid_argument("layernorm_backward: C = " + std::to_string(C) + " needs " + std::to_string(bytes) +
                                " bytes of shared memory, the device has " + std::to_string(most));
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), "layernorm_backward");
}

}  // namespace

size_t layernorm_backward_scratch_floats(int N, int C) { return size_t(backward_blocks(N)) * 2 * size_t(C); }

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N, int C,
                       cudaStream_t s) {
  launch_forward<false, T>(width<T>(C, out, inp, weight, bias), out, mean, rstd, nullptr, inp, nullptr, weight, bias, N,
                           C, s, "layernorm_forward");
}

template <class T>
void fused_residual_layernorm_forward(T* residual, T* out, float* mean, float* rstd, const T* a, const T* b,
                                      const T* weight, const T* bias, int N, int C, cudaStream_t s) {
  launch_forward<true, T>(width<T>(C, residual, out, a, b, weight, bias), out, mean, rstd, residual, a, b, weight, bias,
                          N, C, s, "fused_residual_layernorm_forward");
}

template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const float* mean,
                        const float* rstd, int N, int C, float* scratch, cudaStream_t s) {
  if (N == 0 || C == 0) return;
  if ((dweight || dbias) && !scratch)
    throw std::invalid_argument("layernorm_backward: dweight/dbias need scratch (layernorm_backward_scratch_floats)");
  float* partial = dweight || dbias ? scratch : nullptr;
  if (!dinp && !partial) return;
  const int w = width<T>(C, dinp, dout, inp, weight);
  const auto kernel = w > 1 ? layernorm_backward_kernel<Pack<T>::n, T> : layernorm_backward_kernel<1, T>;
  const int threads = std::min((C / w + 31) / 32 * 32, kMaxBackwardThreads);
  const size_t shared = partial ? 2 * size_t(C) * sizeof(float) : 0;
  allow_shared(reinterpret_cast<const void*>(kernel), shared, C);
  kernel<<<unsigned(backward_blocks(N)), unsigned(threads), shared, s>>>(dinp, partial, dout, inp, weight, mean, rstd,
                                                                         N, C);
  check_launch("layernorm_backward");
  if (!partial) return;
  constexpr unsigned kThreads = 256;
  layernorm_params_kernel<<<unsigned((C + kThreads - 1) / kThreads), kThreads, 0, s>>>(dweight, dbias, partial,
                                                                                       backward_blocks(N), C);
  check_launch("layernorm_backward (dweight, dbias)");
}

#define ZT_INSTANTIATE(T)                                                                                             \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, cudaStream_t);       \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const float*, const float*, int, int, \
                                      float*, cudaStream_t);                                                          \
  template void fused_residual_layernorm_forward<T>(T*, T*, float*, float*, const T*, const T*, const T*, const T*,   \
                                                    int, int, cudaStream_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(bf16)
#undef ZT_INSTANTIATE

}  // namespace zt::cuda
