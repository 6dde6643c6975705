// bf16 causal attention forward on the tensor cores, FlashAttention-2 style: a CTA owns 64 query
// rows of one (b, h), 16 per warp, and streams the keys and values of h's kv head at the rows at
// or before them through shared memory 64 at a time; each warp keeps a running max and sum per
// row (online softmax) and its 16 x hs output in registers, so the T x T scores never exist. With
// a sliding window the key tiles start at the first one the tile's first row sees.
// Legend: kernels/cuda/attention.cuh.
#include <cmath>

#include "kernels/cuda/attention_mma.cuh"

namespace zt::cuda::attn {

namespace {

// grid (B*NH, ceil(T/64)); y counts down the query tiles so the longest (last) run first.
template <int HSP>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(bf16* out, float* lse, const bf16* qkv, Heads L, int C, float scale, int window) {
  const int T = L.T, hs = L.hs;
  using G = Geometry<HSP>;
  constexpr int LD = G::kLd, BR = kOwnRows, BC = G::kFwdStream;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sq = reinterpret_cast<bf16*>(smem);  // [BR][LD]
  bf16* sk = sq + BR * LD;                    // [2][BC][LD]
  bf16* sv = sk + 2 * BC * LD;                // [2][BC][LD]

  const Cta cta(L.NH);
  const int h = cta.head, bh = cta.b * L.NH + h;
  const size_t ld = L.ld();
  const bf16* q = qkv + L.q(cta.b, h);
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BR;
  const int row_a = q0 + cta.warp * 16 + cta.g, row_b = row_a + 8;  // this thread's two rows
  const float sl2 = scale * kLog2e;  // scores in log2 units: exp2 is one instruction
  float o[HSP / 8][4] = {};
  // Running max (log2 units) per row, and this thread's share of the row sum (its 4 lanes are
  // added at the end: every rescale multiplies all shares alike).
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;

  load_tile<BR, HSP>(sq, q + q0 * ld, ld, T - q0, hs);
  // Key tiles from the one holding the first row's first key up to the one holding the last real
  // row of this query tile.
  stream_tiles(window_start(q0, window) / BC, (min(q0 + BR, T) - 1) / BC + 1,
               kv_loader<BC, HSP>(sk, sv, qkv + L.k(cta.b, L.kv_of(h)), qkv + L.v(cta.b, L.kv_of(h)), ld, T, hs),
               [&](int j, int stage) {
    const int k0 = j * BC;
    float s[BC / 8][4] = {};
    mma_abt<BC, HSP, LD>(s, sq + cta.warp * 16 * LD, sk + stage * BC * LD, cta.lane);

    // The causal mask. Keys past T sit only in the last tile, which always overlaps the query
    // tile (so `diag` holds), and are in the future of every real row. `edge`: the window's start
    // falls inside this tile for some row, which then masks the keys before it. Without a window
    // key 0 of tile 0 is in every row's past, so each running max is finite from the first tile
    // on; with one a row may see no key of a tile, its max stays -inf and the tile adds nothing.
    const bool diag = k0 + BC > q0, edge = k0 <= q0 + BR - 1 - window;
    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + n * 8 + 2 * cta.t + (e & 1), row = e < 2 ? row_a : row_b;
        float x = s[n][e] * sl2;
        if ((diag && key > row) || (edge && key <= row - window)) x = -INFINITY;
        s[n][e] = x;
        if (e < 2) mx_a = fmaxf(mx_a, x);
        else mx_b = fmaxf(mx_b, x);
      }
#pragma unroll
    for (int w = 1; w < 4; w <<= 1) {  // over the 4 lanes of a row
      mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, w));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, w));
    }
    const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
    const float base_a = new_a == -INFINITY ? 0.f : new_a, base_b = new_b == -INFINITY ? 0.f : new_b;
    const float c_a = exp2f(m_a - base_a), c_b = exp2f(m_b - base_b);
    m_a = new_a;
    m_b = new_b;
    l_a *= c_a;
    l_b *= c_b;
#pragma unroll
    for (int n = 0; n < HSP / 8; ++n) {
      o[n][0] *= c_a;
      o[n][1] *= c_a;
      o[n][2] *= c_b;
      o[n][3] *= c_b;
    }
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) {
      s[n][0] = exp2f(s[n][0] - base_a);
      s[n][1] = exp2f(s[n][1] - base_a);
      s[n][2] = exp2f(s[n][2] - base_b);
      s[n][3] = exp2f(s[n][3] - base_b);
      l_a += s[n][0] + s[n][1];
      l_b += s[n][2] + s[n][3];
    }
    mma_pb<HSP, BC, LD>(o, s, sv + stage * BC * LD, cta.lane);
  });

#pragma unroll
  for (int w = 1; w < 4; w <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, w);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, w);
  }
  store_rows<false, HSP>(out + size_t(cta.b) * T * C + size_t(h) * hs, size_t(C), o, q0 + cta.warp * 16, T, hs,
                         1.f / l_a, 1.f / l_b, cta.lane);
  if (cta.t == 0) {
    if (row_a < T) lse[size_t(bh) * T + row_a] = (m_a + log2f(l_a)) * kLn2;
    if (row_b < T) lse[size_t(bh) * T + row_b] = (m_b + log2f(l_b)) * kLn2;
  }
}

template <int HSP>
void forward(bf16* out, float* lse, const bf16* qkv, const Dims& d, cudaStream_t s) {
  using G = Geometry<HSP>;
  constexpr size_t smem = size_t(kOwnRows + 4 * G::kFwdStream) * G::kLd * sizeof(bf16);
  allow_smem(forward_kernel<HSP>, smem);
  const dim3 grid(unsigned(d.B * d.NH), unsigned((d.T + kOwnRows - 1) / kOwnRows));
  forward_kernel<HSP><<<grid, kThreads, smem, s>>>(out, lse, qkv, d.heads(), d.C, d.scale, d.window);
  check_launch("attention_forward (bf16 mma)");
}

}  // namespace

void forward_mma(bf16* out, float* lse, const bf16* qkv, const Dims& d, cudaStream_t s) {
  if (d.hs <= 32) forward<32>(out, lse, qkv, d, s);
  else if (d.hs <= 64) forward<64>(out, lse, qkv, d, s);
  else forward<128>(out, lse, qkv, d, s);
}

}  // namespace zt::cuda::attn
