// The Llama family's ops: RMSNorm (Gemma's 1 + w as an offset), the gated MLPs' SwiGLU and
// GeGLU, and rotary position embeddings. Twins of kernels/cpu/llama_ops.cpp, with the same
// formulas in f32.
//
// RMSNorm is layernorm.cu's shape without the mean: the forward one warp per row (the row's sum
// of squares, then the output, the second pass from L1); the backward one block per group of rows
// (g, g+G, ...) with each thread owning fixed channel packs, so the block's dweight partial needs
// no atomics, and a second kernel adding the G partials in block order (bit for bit repeatable).
// SwiGLU and GeGLU are elementwise over (N,F), reading each row's gate and up halves of (N,2F). RoPE runs
// one block per position: the position's h = hs/2 cosines and sines once into shared memory,
// then every q and k head's pairs (x[i], x[i+h]) and the value heads' copy.
// Each takes 16-byte packs where the widths (C, F, hs/2) and the pointers allow, single elements
// otherwise.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/vec.cuh"

namespace zt::cuda {

namespace {

constexpr int kRowsPerBlock = 8;      // rmsnorm forward: one warp each
constexpr int kBackwardBlocks = 512;  // G, at most: per-block partials of dweight
constexpr int kMaxBackwardThreads = 512;
constexpr unsigned kThreads = 256;    // swiglu, geglu
constexpr int kMaxRopeThreads = 256;  // rope: per position

// ---- RMSNorm ----

template <int W, class T>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps, float offset) {
  const int row = int(blockIdx.x) * kRowsPerBlock + int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  if (row >= N) return;  // whole warps leave together
  const T* x = inp + size_t(row) * C;
  float sq = 0.0f;
  for (int c = lane * W; c < C; c += 32 * W) {
    float v[W];
    load_f32<W>(v, x + c);
#pragma unroll
    for (int j = 0; j < W; ++j) sq += v[j] * v[j];
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / C + eps);
  for (int c = lane * W; c < C; c += 32 * W) {
    float v[W], w[W];
    load_f32<W>(v, x + c);
    load_f32<W>(w, weight + c);
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = v[j] * s * (w[j] + offset);
    store_f32<W>(out + size_t(row) * C + c, v);
  }
  if (lane == 0) rstd[row] = s;
}

// With n = x * rstd and w' = w + offset: dinp += rstd * (w'*d - n * mean(w'*d*n)); partial (G, C):
// block g's sums of d * n over its rows (null when dweight is not wanted). Dynamic shared memory:
// C floats, the same sums in progress.
template <int W, class T>
__global__ void rmsnorm_backward_kernel(T* dinp, float* partial, const T* dout, const T* inp, const T* weight,
                                        const float* rstd, int N, int C, float offset) {
  extern __shared__ float sums[];
  __shared__ float row_sums[2][32];  // [row parity][warp]
  const int packs = C / W, warps = int(blockDim.x / 32);
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  if (partial)
    for (int c = int(threadIdx.x) * W; c < C; c += int(blockDim.x) * W)
#pragma unroll
      for (int j = 0; j < W; ++j) sums[c + j] = 0.0f;
  int parity = 0;
  for (int row = int(blockIdx.x); row < N; row += int(gridDim.x), parity ^= 1) {
    const size_t off = size_t(row) * C;
    const float s = rstd[row];
    float dot = 0.0f;
    for (int p = int(threadIdx.x); p < packs; p += int(blockDim.x)) {
      const int c = p * W;
      float x[W], d[W], w[W];
      load_f32<W>(x, inp + off + c);
      load_f32<W>(d, dout + off + c);
      load_f32<W>(w, weight + c);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float norm = x[j] * s;
        dot += (w[j] + offset) * d[j] * norm;
        if (partial) sums[c + j] += norm * d[j];
      }
    }
    if (!dinp) continue;  // the same for the whole block
    // The row's sum over the block; the buffer alternates with the row's parity, so one barrier
    // per row suffices (as layernorm.cu's).
    dot = warp_sum(dot);
    if (lane == 0) row_sums[parity][warp] = dot;
    __syncthreads();
    float mean = 0.0f;
    for (int k = 0; k < warps; ++k) mean += row_sums[parity][k];
    mean /= C;
    for (int p = int(threadIdx.x); p < packs; p += int(blockDim.x)) {
      const int c = p * W;
      float x[W], d[W], w[W], di[W];
      load_f32<W>(x, inp + off + c);
      load_f32<W>(d, dout + off + c);
      load_f32<W>(w, weight + c);
      load_f32<W>(di, dinp + off + c);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float norm = x[j] * s;
        di[j] += ((w[j] + offset) * d[j] - norm * mean) * s;
      }
      store_f32<W>(dinp + off + c, di);
    }
  }
  if (partial) {
    float* out = partial + size_t(blockIdx.x) * C;
    for (int c = int(threadIdx.x) * W; c < C; c += int(blockDim.x) * W)
#pragma unroll
      for (int j = 0; j < W; ++j) out[c + j] = sums[c + j];
  }
}

// dweight[c] += sum over g of partial[g][c], in g order.
template <class T>
__global__ void rmsnorm_dweight_kernel(T* dweight, const float* partial, int G, int C) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  float dw = 0.0f;
  for (int g = 0; g < G; ++g) dw += partial[size_t(g) * C + c];
  dweight[c] = from_f32<T>(to_f32(dweight[c]) + dw);
}

int backward_blocks(int N) { return N < kBackwardBlocks ? N : kBackwardBlocks; }

// Elements per access: a 16-byte pack where n (the width packs move along) and every pointer
// allow it, else one.
template <class T, class... P>
int width(int n, const P*... p) {
  return n % Pack<T>::n == 0 && (aligned16(p) && ...) ? Pack<T>::n : 1;
}

// Raises the kernel's dynamic shared memory limit past the default 48 KiB where it needs more.
void allow_shared(const void* kernel, size_t bytes, int C) {
  if (bytes <= 48 * 1024) return;
  int device = 0, most = 0;
  check(cudaGetDevice(&device), "rmsnorm_backward");
  check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "rmsnorm_backward");
  if (bytes > size_t(most))
    throw std::invalid_argument("rmsnorm_backward: C = " + std::to_string(C) + " needs " + std::to_string(bytes) +
                                " bytes of shared memory, the device has " + std::to_string(most));
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), "rmsnorm_backward");
}

// ---- SwiGLU and GeGLU ----

// The gates: value(g) is the activation, add_grads adds d * up * act'(g) into dg and d * act(g)
// into du.
struct Silu {
  static __device__ __forceinline__ float value(float g) { return g / (1.0f + expf(-g)); }
  static __device__ __forceinline__ void add_grads(float g, float up, float d, float& dg, float& du) {
    const float sig = 1.0f / (1.0f + expf(-g));
    dg += d * up * sig * (1.0f + g * (1.0f - sig));  // silu'(g) = sig (1 + g (1 - sig))
    du += d * g * sig;
  }
};
struct Gelu {  // the tanh approximation (gelu.cuh)
  static __device__ __forceinline__ float value(float g) { return gelu(g); }
  static __device__ __forceinline__ void add_grads(float g, float up, float d, float& dg, float& du) {
    dg += d * up * gelu_grad(g);
    du += d * gelu(g);
  }
};

// Element i of (N,F) (and the W after it, in the same row): forward y = out (N,F); backward
// y = dinp (N,2F), accumulated.
template <class Gate, int W, bool Backward, class T>
__device__ __forceinline__ void glu_at(size_t i, T* y, const T* inp, const T* dout, size_t F) {
  const size_t row = i / F, g = row * 2 * F + (i - row * F);
  float gate[W], up[W];
  load_f32<W>(gate, inp + g);
  load_f32<W>(up, inp + g + F);
  if constexpr (!Backward) {
    float o[W];
#pragma unroll
    for (int j = 0; j < W; ++j) o[j] = Gate::value(gate[j]) * up[j];
    store_f32<W>(y + i, o);
  } else {
    float d[W], dg[W], du[W];
    load_f32<W>(d, dout + i);
    load_f32<W>(dg, y + g);
    load_f32<W>(du, y + g + F);
#pragma unroll
    for (int j = 0; j < W; ++j) Gate::add_grads(gate[j], up[j], d[j], dg[j], du[j]);
    store_f32<W>(y + g, dg);
    store_f32<W>(y + g + F, du);
  }
}

// W > 1 only where F % W == 0: a pack then never crosses a row and no element is left over.
template <class Gate, int W, bool Backward, class T>
__global__ void glu_kernel(T* y, const T* inp, const T* dout, size_t n, size_t F) {
  grid_stride<W>(
      n, [&](size_t i) { glu_at<Gate, W, Backward>(i, y, inp, dout, F); },
      [&](size_t i) { glu_at<Gate, 1, Backward>(i, y, inp, dout, F); });
}

template <class Gate, bool Backward, class T>
void launch_glu(T* y, const T* inp, const T* dout, int N, int F, cudaStream_t s, const char* name) {
  const size_t n = size_t(N) * size_t(F);
  if (n == 0) return;
  if (width<T>(F, y, inp, dout) > 1)
    glu_kernel<Gate, Pack<T>::n, Backward>
        <<<blocks_for(n / Pack<T>::n + 1, kThreads), kThreads, 0, s>>>(y, inp, dout, n, size_t(F));
  else
    glu_kernel<Gate, 1, Backward><<<blocks_for(n, kThreads), kThreads, 0, s>>>(y, inp, dout, n, size_t(F));
  check_launch(name);
}

// ---- RoPE ----

// One block per position bt of (B,T); y = out (forward, may be x itself) or dinp (backward,
// accumulated). Dynamic shared memory: the position's h cosines then h sines.
template <int W, bool Backward, class T>
__global__ void rope_kernel(T* y, const T* x, const float* inv_freq, int T_, int NH, int NKV, int hs) {
  extern __shared__ float cs[];
  const int h = hs / 2, t = int(blockIdx.x) % T_;
  for (int i = int(threadIdx.x); i < h; i += int(blockDim.x)) {
    // The CPU's angle: one f32 product (no contraction), then the accurate sincosf.
    float sn, cn;
    sincosf(__fmul_rn(float(t), inv_freq[i]), &sn, &cn);
    cs[i] = cn;
    cs[h + i] = sn;
  }
  __syncthreads();
  const size_t off = size_t(blockIdx.x) * size_t(NH + 2 * NKV) * hs;
  const int per_head = h / W, rotated = (NH + NKV) * per_head, units = rotated + NKV * hs / W;
  for (int u = int(threadIdx.x); u < units; u += int(blockDim.x)) {
    if (u < rotated) {
      const int head = u / per_head, i = (u - head * per_head) * W;
      const size_t o = off + size_t(head) * hs + i;
      float x1[W], x2[W], y1[W], y2[W];
      load_f32<W>(x1, x + o);
      load_f32<W>(x2, x + o + h);
      if constexpr (Backward) {
        load_f32<W>(y1, y + o);
        load_f32<W>(y2, y + o + h);
      }
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float c = cs[i + j], s = cs[h + i + j];
        if constexpr (Backward) {  // the inverse rotation
          y1[j] += x1[j] * c + x2[j] * s;
          y2[j] += x2[j] * c - x1[j] * s;
        } else {
          y1[j] = x1[j] * c - x2[j] * s;
          y2[j] = x2[j] * c + x1[j] * s;
        }
      }
      store_f32<W>(y + o, y1);
      store_f32<W>(y + o + h, y2);
    } else {  // value heads
      const size_t o = off + size_t(NH + NKV) * hs + size_t(u - rotated) * W;
      float v[W];
      load_f32<W>(v, x + o);
      if constexpr (Backward) {
        float acc[W];
        load_f32<W>(acc, y + o);
#pragma unroll
        for (int j = 0; j < W; ++j) v[j] += acc[j];
      }
      store_f32<W>(y + o, v);
    }
  }
}

constexpr int kMaxRopeHalf = 48 * 1024 / (2 * sizeof(float));  // hs/2 whose cos and sin fit 48 KiB

template <bool Backward, class T>
void launch_rope(T* y, const T* x, const float* inv_freq, int B, int T_, int NH, int NKV, int hs, cudaStream_t s,
                 const char* name) {
  if (hs % 2 != 0)
    throw std::invalid_argument(std::string(name) + ": the head size hs must be even (rotate-half pairs), not " +
                                std::to_string(hs));
  if (hs / 2 > kMaxRopeHalf)
    throw std::invalid_argument(std::string(name) + ": head size " + std::to_string(hs) + " exceeds " +
                                std::to_string(2 * kMaxRopeHalf));
  if (B <= 0 || T_ <= 0 || hs == 0 || NH + 2 * NKV == 0) return;
  const int h = hs / 2, w = width<T>(h, y, x);
  const int units = (NH + NKV) * (h / w) + NKV * hs / w;
  const int threads = std::clamp((units + 31) / 32 * 32, 32, kMaxRopeThreads);
  const auto kernel = w > 1 ? rope_kernel<Pack<T>::n, Backward, T> : rope_kernel<1, Backward, T>;
  kernel<<<unsigned(B) * unsigned(T_), unsigned(threads), 2 * size_t(h) * sizeof(float), s>>>(y, x, inv_freq, T_, NH,
                                                                                              NKV, hs);
  check_launch(name);
}

}  // namespace

size_t rmsnorm_backward_scratch_floats(int N, int C) { return size_t(backward_blocks(N)) * size_t(C); }

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps, float offset,
                     cudaStream_t s) {
  if (N == 0) return;
  const auto kernel =
      width<T>(C, out, inp, weight) > 1 ? rmsnorm_forward_kernel<Pack<T>::n, T> : rmsnorm_forward_kernel<1, T>;
  kernel<<<unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock), kRowsPerBlock * 32, 0, s>>>(out, rstd, inp, weight, N, C,
                                                                                          eps, offset);
  check_launch("rmsnorm_forward");
}

template <class T>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int N,
                      int C, float offset, float* scratch, cudaStream_t s) {
  if (N == 0 || C == 0) return;
  if (dweight && !scratch)
    throw std::invalid_argument("rmsnorm_backward: dweight needs scratch (rmsnorm_backward_scratch_floats)");
  float* partial = dweight ? scratch : nullptr;
  if (!dinp && !partial) return;
  const int w = width<T>(C, dinp, dout, inp, weight);
  const auto kernel = w > 1 ? rmsnorm_backward_kernel<Pack<T>::n, T> : rmsnorm_backward_kernel<1, T>;
  const int threads = std::min((C / w + 31) / 32 * 32, kMaxBackwardThreads);
  const size_t shared = partial ? size_t(C) * sizeof(float) : 0;
  allow_shared(reinterpret_cast<const void*>(kernel), shared, C);
  kernel<<<unsigned(backward_blocks(N)), unsigned(threads), shared, s>>>(dinp, partial, dout, inp, weight, rstd, N, C,
                                                                         offset);
  check_launch("rmsnorm_backward");
  if (!partial) return;
  constexpr unsigned kParamThreads = 256;
  rmsnorm_dweight_kernel<<<unsigned((C + kParamThreads - 1) / kParamThreads), kParamThreads, 0, s>>>(
      dweight, partial, backward_blocks(N), C);
  check_launch("rmsnorm_backward (dweight)");
}

template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F, cudaStream_t s) {
  launch_glu<Silu, false, T>(out, inp, nullptr, N, F, s, "swiglu_forward");
}

template <class T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int N, int F, cudaStream_t s) {
  if (!dinp) return;
  launch_glu<Silu, true, T>(dinp, inp, dout, N, F, s, "swiglu_backward");
}

template <class T>
void geglu_forward(T* out, const T* inp, int N, int F, cudaStream_t s) {
  launch_glu<Gelu, false, T>(out, inp, nullptr, N, F, s, "geglu_forward");
}

template <class T>
void geglu_backward(T* dinp, const T* inp, const T* dout, int N, int F, cudaStream_t s) {
  if (!dinp) return;
  launch_glu<Gelu, true, T>(dinp, inp, dout, N, F, s, "geglu_backward");
}

template <class T>
void rope_forward(T* out, const T* inp, const float* inv_freq, int B, int T_, int NH, int NKV, int hs, cudaStream_t s) {
  launch_rope<false, T>(out, inp, inv_freq, B, T_, NH, NKV, hs, s, "rope_forward");
}

template <class T>
void rope_backward(T* dinp, const T* dout, const float* inv_freq, int B, int T_, int NH, int NKV, int hs,
                   cudaStream_t s) {
  if (!dinp) return;
  launch_rope<true, T>(dinp, dout, inv_freq, B, T_, NH, NKV, hs, s, "rope_backward");
}

#define ZT_INSTANTIATE(T)                                                                                        \
  template void rmsnorm_forward<T>(T*, float*, const T*, const T*, int, int, float, float, cudaStream_t);        \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const float*, int, int, float, float*, \
                                    cudaStream_t);                                                               \
  template void swiglu_forward<T>(T*, const T*, int, int, cudaStream_t);                                         \
  template void swiglu_backward<T>(T*, const T*, const T*, int, int, cudaStream_t);                              \
  template void geglu_forward<T>(T*, const T*, int, int, cudaStream_t);                                          \
  template void geglu_backward<T>(T*, const T*, const T*, int, int, cudaStream_t);                               \
  template void rope_forward<T>(T*, const T*, const float*, int, int, int, int, int, cudaStream_t);              \
  template void rope_backward<T>(T*, const T*, const float*, int, int, int, int, int, cudaStream_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(bf16)
#undef ZT_INSTANTIATE

}  // namespace zt::cuda
