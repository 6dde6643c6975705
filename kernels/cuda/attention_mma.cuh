// The bf16 attention kernels' shared pieces: tile geometry, the global-to-shared tile copy, and
// the two warp-level products every pass is made of (fragments: [Note: mma fragments] in mma.cuh).
//
// A CTA is 4 warps; each warp owns 16 rows of whatever the CTA's "own" tile is (query rows in the
// forward and dQ passes, key rows in the dK/dV pass) and streams the other side through shared
// memory in tiles, two stages deep so the next tile's copy overlaps this tile's math.
#pragma once

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"

namespace zt::cuda::attn {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kOwnRows = kWarps * 16;  // rows of the CTA's own tile

// HSP: the head size padded to a multiple of 16 (the mma's k); hs <= HSP, the columns beyond hs
// are zero in shared memory so that they add nothing to any product.
template <int HSP> struct Geometry {
  static_assert(HSP % 16 == 0 && HSP <= 128);
  // Shared-memory row stride in bf16: 16 bytes of padding put the 8 rows one ldmatrix phase reads
  // in 8 different 16-byte bank groups (strides of 80, 144, 272 bytes), so no bank conflicts.
  static constexpr int kLd = HSP + 8;
  static constexpr int kTileBytes(int rows) { return rows * kLd * 2; }
  // Rows of the streamed tiles. A warp keeps its accumulators (HSP/8 x 4 floats each) and two
  // 16 x rows score tiles (rows/8 x 4 floats) in registers, so at HSP = 128 the backward streams
  // 32 rows at a time to stay clear of spills.
  static constexpr int kFwdStream = 64;
  static constexpr int kBwdStream = HSP <= 64 ? 64 : 32;
};

// Copies rows [0, ROWS) x columns [0, HSP) of a row-major global matrix (row stride `ld`
// elements) into shared memory (row stride HSP + 8), asynchronously, 16 bytes per copy. Rows at
// or past `valid_rows` and columns at or past `hs` (a multiple of 8) are filled with zeros.
// `src` must point at a readable row (valid_rows >= 1). The caller commits the group.
template <int ROWS, int HSP>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* src, size_t ld, int valid_rows, int hs) {
  constexpr int kChunks = HSP / 8;
  for (int i = threadIdx.x; i < ROWS * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = r < valid_rows && c * 8 < hs;
    mma::cp_async16(dst + r * Geometry<HSP>::kLd + c * 8, ok ? src + r * ld + c * 8 : src, ok);
  }
}

// load(j, stage) for stream_tiles: rows [j*ROWS, (j+1)*ROWS) of k and v (row stride ld, T rows)
// into slot `stage` of the two-slot tiles sk and sv.
template <int ROWS, int HSP>
__device__ __forceinline__ auto kv_loader(bf16* sk, bf16* sv, const bf16* k, const bf16* v, size_t ld, int T, int hs) {
  return [=](int j, int stage) {
    const int r0 = j * ROWS;
    load_tile<ROWS, HSP>(sk + stage * ROWS * Geometry<HSP>::kLd, k + r0 * ld, ld, T - r0, hs);
    load_tile<ROWS, HSP>(sv + stage * ROWS * Geometry<HSP>::kLd, v + r0 * ld, ld, T - r0, hs);
  };
}

// Runs body(j, stage) for the streamed tiles j = first .. n-1, where load(j, stage) put tile j
// into shared-memory slot `stage` (0 or 1); tile j+1's copies are issued before tile j's body
// runs, so they overlap it. Copies the CTA issued before the call (its own tile) land with tile
// `first`. No races: body(j) starts after the wait for tile j's group and a barrier, so every
// thread's copies and plain stores into the slot are visible to all; load(j+1) refills the slot
// body(j-1) read, which every thread has left at the barrier that ends body(j-1).
template <class Load, class Body>
__device__ __forceinline__ void stream_tiles(int first, int n, Load&& load, Body&& body) {
  load(first, 0);
  mma::cp_async_commit();
  for (int j = first; j < n; ++j) {
    const int stage = (j - first) & 1;
    if (j + 1 < n) load(j + 1, stage ^ 1);
    mma::cp_async_commit();  // possibly empty, so that "all but the newest group" is tile j's
    mma::cp_async_wait<1>();
    __syncthreads();
    body(j, stage);
    __syncthreads();
  }
}

// Where a thread sits: its warp, its lane and the lane's fragment coordinates g and t ([Note: mma
// fragments]), and the batch row b and head of its CTA (blockIdx.x = b * heads + head, heads
// being NH for a CTA of one query head, NKV for one of a kv head).
struct Cta {
  int warp, lane, g, t, b, head;
  __device__ explicit Cta(int heads)
      : warp(int(threadIdx.x) >> 5), lane(int(threadIdx.x) & 31), g(lane >> 2), t(lane & 3),
        b(int(blockIdx.x) / heads), head(int(blockIdx.x) % heads) {}
};

// acc (16 x N) += A (16 x K) B^T for one warp: A's 16 rows and B's N rows (K wide, row stride
// LD) in shared memory, as ldmatrix reads them; B^T is what the mma's "col" operand wants.
template <int N, int K, int LD>
__device__ __forceinline__ void mma_abt(float (&acc)[N / 8][4], const bf16* a, const bf16* b, int lane) {
  static_assert(N % 16 == 0 && K % 16 == 0);
#pragma unroll
  for (int kc = 0; kc < K / 16; ++kc) {
    uint32_t af[4];
    mma::ldmatrix_x4(af, a + (lane & 15) * LD + kc * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int nb = 0; nb < N / 16; ++nb) {
      // matrices: rows n0..n0+7 at k0, k0+8, then n0+8..n0+15 at k0, k0+8 -> b0, b1 of two n8 tiles
      uint32_t bf[4];
      mma::ldmatrix_x4(bf, b + (nb * 16 + (lane >> 4) * 8 + (lane & 7)) * LD + kc * 16 + ((lane >> 3) & 1) * 8);
      mma::mma_bf16(acc[2 * nb], af, bf[0], bf[1]);
      mma::mma_bf16(acc[2 * nb + 1], af, bf[2], bf[3]);
    }
  }
}

// acc (16 x N) += P (16 x K) B for one warp: P in registers as K/8 accumulator tiles (rounded to
// bf16 here), B (K x N) row-major in shared memory (row stride LD), read transposed by ldmatrix.
template <int N, int K, int LD>
__device__ __forceinline__ void mma_pb(float (&acc)[N / 8][4], const float (&p)[K / 8][4], const bf16* b, int lane) {
  static_assert(N % 16 == 0 && K % 16 == 0);
#pragma unroll
  for (int kc = 0; kc < K / 16; ++kc) {
    const uint32_t af[4] = {mma::pack_bf16(p[2 * kc][0], p[2 * kc][1]), mma::pack_bf16(p[2 * kc][2], p[2 * kc][3]),
                            mma::pack_bf16(p[2 * kc + 1][0], p[2 * kc + 1][1]),
                            mma::pack_bf16(p[2 * kc + 1][2], p[2 * kc + 1][3])};
#pragma unroll
    for (int nb = 0; nb < N / 16; ++nb) {
      // matrices: k rows k0..k0+7, k0+8..k0+15 at n0, then the same at n0+8 -> b0, b1 of two n8 tiles
      uint32_t bf[4];
      mma::ldmatrix_x4_trans(bf, b + (kc * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD + nb * 16 + (lane >> 4) * 8);
      mma::mma_bf16(acc[2 * nb], af, bf[0], bf[1]);
      mma::mma_bf16(acc[2 * nb + 1], af, bf[2], bf[3]);
    }
  }
}

// dst[row][col..col+1] (+)= (x, y) * mul, as one bf16 pair (col even, so 4-byte aligned).
template <bool Accumulate>
__device__ __forceinline__ void store_pair(bf16* dst, float x, float y, float mul) {
  __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(dst);
  if constexpr (Accumulate) {
    const float2 old = __bfloat1622float2(*p);
    x = old.x + x * mul;
    y = old.y + y * mul;
  } else {
    x *= mul;
    y *= mul;
  }
  *p = __floats2bfloat162_rn(x, y);
}

// Stores one warp's 16 x HSP accumulator (rows row0 + g, row0 + 8 + g of a matrix with row stride
// ld, those below `rows`; columns below hs), times mul; accumulating onto what is there or not.
template <bool Accumulate, int HSP>
__device__ __forceinline__ void store_rows(bf16* dst, size_t ld, const float (&acc)[HSP / 8][4], int row0, int rows,
                                           int hs, float mul_a, float mul_b, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < HSP / 8; ++j) {
    const int col = j * 8 + 2 * t;
    if (col >= hs) continue;
    if (row0 + g < rows) store_pair<Accumulate>(dst + (row0 + g) * ld + col, acc[j][0], acc[j][1], mul_a);
    if (row0 + g + 8 < rows) store_pair<Accumulate>(dst + (row0 + g + 8) * ld + col, acc[j][2], acc[j][3], mul_b);
  }
}

}  // namespace zt::cuda::attn
