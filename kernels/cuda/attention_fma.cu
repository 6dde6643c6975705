// f32 causal attention with plain FMAs: the reference-precision path, tiled like the bf16
// kernels (online softmax forward; backward from lse and D with dK/dV and dQ in separate passes,
// [Note: dQ pass] in attention_mma_backward.cu) but with one lane per key or query of a 32-wide
// tile instead of tensor-core fragments. Legend: kernels/cuda/attention.cuh.
//
// A CTA is 8 warps owning 32 rows (4 per warp); the other side streams through shared memory
// 32 rows at a time, lane j taking row j. Shared rows that lane j reads as "its" row have stride
// hs + 1 so that the 32 lanes hit 32 different banks; rows every lane reads alike (broadcasts)
// or reads at column `lane` keep stride hs.
#include <cmath>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/common.cuh"

namespace zt::cuda::attn {

namespace {

constexpr int kFmaWarps = 8;
constexpr int kFmaThreads = kFmaWarps * 32;
constexpr int kTile = 32;                       // rows per tile, own and streamed
constexpr int kRowsPerWarp = kTile / kFmaWarps;  // 4
constexpr int kCols = 128 / 32;                 // columns per lane: d = lane + 32 c, c < kCols, d < hs <= 128

// dst[r][c] = rows r0 + r of src (row stride ld) for r < kTile, c < hs; zeros past row T.
__device__ void load_rows(float* dst, int dst_ld, const float* src, size_t ld, int r0, int T, int hs) {
  for (int i = threadIdx.x; i < kTile * hs; i += kFmaThreads) {
    const int r = i / hs, c = i % hs;
    dst[r * dst_ld + c] = r0 + r < T ? src[size_t(r0 + r) * ld + c] : 0.f;
  }
}

__device__ __forceinline__ float dot(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int c = 0; c < n; ++c) s = fmaf(a[c], b[c], s);
  return s;
}

// acc[c] (column lane + 32c of one row) += sum over j < 32 of x_j rows[j][lane + 32c], x_j being
// lane j's x: the lanes' values weight the rows of a shared tile (row stride `stride`).
__device__ __forceinline__ void add_weighted_rows(float (&acc)[kCols], float x, const float* rows, int stride, int hs,
                                                  int lane) {
#pragma unroll 4  // fully unrolled, the callers' loops over their 4 rows balloon to 130-220 registers
  for (int j = 0; j < kTile; ++j) {
    const float xj = __shfl_sync(0xffffffffu, x, j);
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      if (lane + 32 * c < hs) acc[c] = fmaf(xj, rows[j * stride + lane + 32 * c], acc[c]);
  }
}

// dst[lane + 32c] (+)= acc[c] * mul for the columns below hs: one row of a lane-split accumulator.
template <bool Accumulate>
__device__ __forceinline__ void store_row(float* dst, const float (&acc)[kCols], float mul, int hs, int lane) {
#pragma unroll
  for (int c = 0; c < kCols; ++c)
    if (lane + 32 * c < hs) {
      if constexpr (Accumulate) dst[lane + 32 * c] += acc[c] * mul;
      else dst[lane + 32 * c] = acc[c] * mul;
    }
}

// grid (B*NH, ceil(T/32)), y counting down the query tiles (the longest first).
__global__ void __launch_bounds__(kFmaThreads)
    forward_kernel(float* out, float* lse, const float* qkv, Heads L, int C, float scale, int window) {
  const int T = L.T, hs = L.hs;
  extern __shared__ float fsmem[];
  const int hp = hs + 1;
  float* sq = fsmem;             // [32][hs]  broadcast
  float* sk = sq + kTile * hs;   // [32][hp]  lane j's row
  float* sv = sk + kTile * hp;   // [32][hs]  column `lane`

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int bh = blockIdx.x, b = bh / L.NH, h = bh % L.NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const size_t ld = L.ld();
  const float* q = qkv + L.q(b, h);
  const float* k = qkv + L.k(b, L.kv_of(h));
  const float* v = qkv + L.v(b, L.kv_of(h));
  const int n_tiles = (min(q0 + kTile, T) - 1) / kTile + 1;
  load_rows(sq, hs, q, ld, q0, T, hs);

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kCols];
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;  // until the row's first key; without a window tile 0's key 0, so after it
    l[i] = 0.f;
    for (int c = 0; c < kCols; ++c) o[i][c] = 0.f;
  }
  for (int j = window_start(q0, window) / kTile; j < n_tiles; ++j) {
    const int k0 = j * kTile, key = k0 + lane;
    __syncthreads();  // the last tile's readers are done
    load_rows(sk, hp, k, ld, k0, T, hs);
    load_rows(sv, hs, v, ld, k0, T, hs);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i, row = q0 + r;
      // keys past T are later than every real row
      const float s = key <= row && key > row - window ? dot(sq + r * hs, sk + lane * hp, hs) * scale : -INFINITY;
      const float mx = fmaxf(m[i], warp_max(s));
      // A row whose window starts past this tile has no key yet (mx -inf): it adds nothing.
      const float base = mx == -INFINITY ? 0.f : mx;
      const float corr = expf(m[i] - base), p = expf(s - base);
      m[i] = mx;
      l[i] = l[i] * corr + warp_sum(p);
#pragma unroll
      for (int c = 0; c < kCols; ++c) o[i][c] *= corr;
      add_weighted_rows(o[i], p, sv, hs, hs, lane);
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = q0 + warp * kRowsPerWarp + i;
    if (row >= T) continue;
    store_row<false>(out + (size_t(b) * T + row) * C + size_t(h) * hs, o[i], 1.f / l[i], hs, lane);
    if (lane == 0) lse[size_t(bh) * T + row] = m[i] + logf(l[i]);
  }
}

// dK, dV of the 32 keys [k0, k0+32) of one (b, kv head) (4 per warp): the CTA visits, for each
// query head of the group in turn, the query tiles from the one holding k0 on, so the group's sum
// is formed in registers in head order; lane j takes query r0 + j, up to the last query whose
// window holds one of the keys. grid (B*NKV, ceil(T/32)).
__global__ void __launch_bounds__(kFmaThreads) dkdv_kernel(const BackwardArgs<float> a) {
  const Heads L = a.L;
  const int T = L.T, C = a.C, hs = L.hs;
  extern __shared__ float fsmem[];
  const int hp = hs + 1;
  float* sk = fsmem;             // [32][hs]  broadcast
  float* sv = sk + kTile * hs;   // [32][hs]  broadcast
  float* sq = sv + kTile * hs;   // [32][hp]  lane j's row, and column `lane`
  float* sdo = sq + kTile * hp;  // [32][hp]
  float* sl = sdo + kTile * hp;  // [32] lse (+inf past T: P = 0 there)
  float* sd = sl + kTile;        // [32] D

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int b = blockIdx.x / L.NKV, kv = blockIdx.x % L.NKV;
  const int k0 = blockIdx.y * kTile;
  const size_t ld = L.ld();
  load_rows(sk, hs, a.qkv + L.k(b, kv), ld, k0, T, hs);
  load_rows(sv, hs, a.qkv + L.v(b, kv), ld, k0, T, hs);

  float dk[kRowsPerWarp][kCols] = {}, dv[kRowsPerWarp][kCols] = {};
  for (int h = kv * L.group(); h < (kv + 1) * L.group(); ++h) {
    const int bh = b * L.NH + h;
    const float* q = a.qkv + L.q(b, h);
    const float* dy = a.dout + size_t(b) * T * C + size_t(h) * hs;
    for (int i = k0 / kTile; i * kTile < min(T, k0 + kTile - 1 + a.window); ++i) {
      const int r0 = i * kTile, query = r0 + lane;
      __syncthreads();
      load_rows(sq, hp, q, ld, r0, T, hs);
      load_rows(sdo, hp, dy, size_t(C), r0, T, hs);
      if (threadIdx.x < kTile) {
        sl[lane] = query < T ? a.lse[size_t(bh) * T + query] : INFINITY;
        sd[lane] = query < T ? a.D[size_t(bh) * T + query] : 0.f;
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kRowsPerWarp; ++kk) {
        const int kr = warp * kRowsPerWarp + kk;
        const float s = dot(sk + kr * hs, sq + lane * hp, hs);
        const float dp = dot(sv + kr * hs, sdo + lane * hp, hs);
        const float p = query >= k0 + kr && query < k0 + kr + a.window ? expf(s * a.scale - sl[lane]) : 0.f;
        const float ds = p * (dp - sd[lane]);
        add_weighted_rows(dv[kk], p, sdo, hp, hs, lane);
        add_weighted_rows(dk[kk], ds, sq, hp, hs, lane);
      }
    }
  }
#pragma unroll
  for (int kk = 0; kk < kRowsPerWarp; ++kk) {
    const int key = k0 + warp * kRowsPerWarp + kk;
    if (key >= T) continue;
    const size_t row = size_t(key) * ld;
    store_row<true>(a.dqkv + L.k(b, kv) + row, dk[kk], a.scale, hs, lane);
    store_row<true>(a.dqkv + L.v(b, kv) + row, dv[kk], 1.f, hs, lane);
  }
}

// dQ of the 32 query rows [q0, q0+32) of one (b, h) (4 per warp) over the key tiles at or before
// them within their windows; lane j takes key k0 + j. grid (B*NH, ceil(T/32)), y counting down.
__global__ void __launch_bounds__(kFmaThreads) dq_kernel(const BackwardArgs<float> a) {
  const Heads L = a.L;
  const int T = L.T, C = a.C, hs = L.hs;
  extern __shared__ float fsmem[];
  const int hp = hs + 1;
  float* sq = fsmem;             // [32][hs]  broadcast
  float* sdo = sq + kTile * hs;  // [32][hs]  broadcast
  float* sk = sdo + kTile * hs;  // [32][hp]  lane j's row, and column `lane`
  float* sv = sk + kTile * hp;   // [32][hp]  lane j's row

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int bh = blockIdx.x, b = bh / L.NH, h = bh % L.NH;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const size_t ld = L.ld();
  const float* k = a.qkv + L.k(b, L.kv_of(h));
  const float* v = a.qkv + L.v(b, L.kv_of(h));
  load_rows(sq, hs, a.qkv + L.q(b, h), ld, q0, T, hs);
  load_rows(sdo, hs, a.dout + size_t(b) * T * C + size_t(h) * hs, size_t(C), q0, T, hs);

  float lr[kRowsPerWarp], dr[kRowsPerWarp], dq[kRowsPerWarp][kCols] = {};
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = q0 + warp * kRowsPerWarp + i;
    lr[i] = row < T ? a.lse[size_t(bh) * T + row] : INFINITY;
    dr[i] = row < T ? a.D[size_t(bh) * T + row] : 0.f;
  }
  const int n_tiles = (min(q0 + kTile, T) - 1) / kTile + 1;
  for (int j = window_start(q0, a.window) / kTile; j < n_tiles; ++j) {
    const int k0 = j * kTile, key = k0 + lane;
    __syncthreads();
    load_rows(sk, hp, k, ld, k0, T, hs);
    load_rows(sv, hp, v, ld, k0, T, hs);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i, row = q0 + r;
      const float s = dot(sq + r * hs, sk + lane * hp, hs);
      const float dp = dot(sdo + r * hs, sv + lane * hp, hs);
      const float p = key <= row && key > row - a.window ? expf(s * a.scale - lr[i]) : 0.f;
      const float ds = p * (dp - dr[i]);
      add_weighted_rows(dq[i], ds, sk, hp, hs, lane);
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = q0 + warp * kRowsPerWarp + i;
    if (row >= T) continue;
    store_row<true>(a.dqkv + L.q(b, h) + size_t(row) * ld, dq[i], a.scale, hs, lane);
  }
}

// One CTA per 32-row tile of each (b, head): query heads (heads = NH) or kv heads (heads = NKV).
dim3 fma_grid(const Dims& d, int heads) { return dim3(unsigned(d.B * heads), unsigned((d.T + kTile - 1) / kTile)); }

}  // namespace

void forward_fma(float* out, float* lse, const float* qkv, const Dims& d, cudaStream_t s) {
  const size_t smem = size_t(kTile) * (3 * d.hs + 1) * sizeof(float);
  allow_smem(forward_kernel, smem);
  forward_kernel<<<fma_grid(d, d.NH), kFmaThreads, smem, s>>>(out, lse, qkv, d.heads(), d.C, d.scale, d.window);
  check_launch("attention_forward (f32)");
}

void backward_fma(const BackwardArgs<float>& a, const Dims& d, cudaStream_t s) {
  const size_t dkdv_smem = size_t(kTile) * (4 * d.hs + 2 + 2) * sizeof(float);
  allow_smem(dkdv_kernel, dkdv_smem);
  dkdv_kernel<<<fma_grid(d, d.NKV), kFmaThreads, dkdv_smem, s>>>(a);
  check_launch("attention_backward dK/dV (f32)");

  const size_t dq_smem = size_t(kTile) * (4 * d.hs + 2) * sizeof(float);
  allow_smem(dq_kernel, dq_smem);
  dq_kernel<<<fma_grid(d, d.NH), kFmaThreads, dq_smem, s>>>(a);
  check_launch("attention_backward dQ (f32)");
}

}  // namespace zt::cuda::attn
