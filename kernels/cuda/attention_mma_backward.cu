// bf16 causal attention backward on the tensor cores, FlashAttention-2's scheme with dQ in a
// pass of its own. Both passes recompute the probabilities from the forward's lse,
// P = exp(scale q.k - lse), and use D = rowsum(dout * out) (computed first, attention.cu):
//   dV = P^T dout,   dP = dout V^T,   dS = P * (dP - D),   dK = scale dS^T Q,   dQ = scale dS K.
// Legend: kernels/cuda/attention.cuh.
//
// [Note: dQ pass] The key-block pass owns dK and dV of its 64 keys and visits every query tile
// after them; the dQ contributions it forms there belong to query rows other CTAs also reach, so
// they would need f32 atomics into a (B,T,C) scratch and a final add into dqkv. Instead a second
// pass owns 64 query rows and loops over their key tiles, recomputing S and dP (7 tile products
// per query-key tile pair instead of 5). In exchange every element of dqkv is read and written by
// exactly one thread of one CTA: no atomics, no scratch beyond D, and gradients that are the
// same bits on every run (the offload and checkpoint tests compare runs bit for bit).
#include <cmath>

#include "kernels/cuda/attention_mma.cuh"

namespace zt::cuda::attn {

namespace {

// dK, dV of kv head `kv` (its columns of dqkv) += for the 64 keys [k0, k0+64) of one (b, kv):
// for each query head of the group in turn, the CTA visits the query tiles from the one holding
// k0 to the last whose rows' windows reach one of the keys, so the group's sum is formed in
// registers in head order (no atomics). Each warp
// owns 16 keys and forms the transposed tiles S^T = K Q^T and dP^T = V dout^T (keys x queries),
// so that P^T and dS^T are already the A operands of dV += P^T dout and dK += dS^T Q.
// grid (B*NKV, ceil(T/64)).
template <int HSP>
__global__ void __launch_bounds__(kThreads) dkdv_kernel(const BackwardArgs<bf16> a) {
  const Heads L = a.L;
  const int T = L.T, C = a.C, hs = L.hs;
  using G = Geometry<HSP>;
  constexpr int LD = G::kLd, BC = kOwnRows, BR = G::kBwdStream;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sk = reinterpret_cast<bf16*>(smem);                 // [BC][LD]
  bf16* sv = sk + BC * LD;                                   // [BC][LD]
  bf16* sq = sv + BC * LD;                                   // [2][BR][LD]
  bf16* sdo = sq + 2 * BR * LD;                              // [2][BR][LD]
  float* sl = reinterpret_cast<float*>(sdo + 2 * BR * LD);  // [2][BR] lse, log2 units
  float* sd = sl + 2 * BR;                                   // [2][BR] D

  const Cta cta(L.NKV);
  const int kv = cta.head;
  const size_t ld = L.ld();
  const int k0 = blockIdx.y * BC;
  const int key_a = k0 + cta.warp * 16 + cta.g, key_b = key_a + 8;  // this thread's two keys
  const float sl2 = a.scale * kLog2e;
  float dk[HSP / 8][4] = {}, dv[HSP / 8][4] = {};

  load_tile<BC, HSP>(sk, a.qkv + L.k(cta.b, kv) + k0 * ld, ld, T - k0, hs);
  load_tile<BC, HSP>(sv, a.qkv + L.v(cta.b, kv) + k0 * ld, ld, T - k0, hs);
  for (int h = kv * L.group(); h < (kv + 1) * L.group(); ++h) {
    const bf16* q = a.qkv + L.q(cta.b, h);
    const bf16* dy = a.dout + size_t(cta.b) * T * C + size_t(h) * hs;
    const float* lse_bh = a.lse + (size_t(cta.b) * L.NH + h) * T;
    const float* d_bh = a.D + (size_t(cta.b) * L.NH + h) * T;
    // Query tile i into `stage`: rows past T are zeros with lse +inf (so P = 0 there) and D 0.
    auto load_queries = [&](int i, int stage) {
      const int r0 = i * BR;
      load_tile<BR, HSP>(sq + stage * BR * LD, q + r0 * ld, ld, T - r0, hs);
      load_tile<BR, HSP>(sdo + stage * BR * LD, dy + size_t(r0) * C, size_t(C), T - r0, hs);
      for (int r = threadIdx.x; r < BR; r += kThreads) {
        const bool real = r0 + r < T;
        sl[stage * BR + r] = real ? lse_bh[r0 + r] * kLog2e : INFINITY;
        sd[stage * BR + r] = real ? d_bh[r0 + r] : 0.f;
      }
    };
    // The own K and V tiles, copied above, land with the first head's first query tile; every
    // head's pass ends at a barrier, so the next head's copies refill slots no thread still reads.
    const int last = min(T, k0 + BC - 1 + a.window);  // past the last query that sees a key here
    stream_tiles(k0 / BR, (last + BR - 1) / BR, load_queries, [&](int i, int stage) {
      const int r0 = i * BR;
      const bf16* qs = sq + stage * BR * LD;
      const bf16* dos = sdo + stage * BR * LD;
      const float* ls = sl + stage * BR;
      const float* ds = sd + stage * BR;

      float p[BR / 8][4] = {}, dp[BR / 8][4] = {};
      mma_abt<BR, HSP, LD>(p, sk + cta.warp * 16 * LD, qs, cta.lane);
      mma_abt<BR, HSP, LD>(dp, sv + cta.warp * 16 * LD, dos, cta.lane);
      // P^T, masked where the query precedes the key (keys past T: only in the last key tile,
      // which every query tile it visits overlaps, so `diag` holds and real queries mask them)
      // and, where `edge`, where the key is before the query's window. The mask is applied after
      // exp2: a masked score may overflow, and is then replaced.
      const bool diag = r0 < k0 + BC, edge = r0 + BR - 1 - k0 >= a.window;
#pragma unroll
      for (int n = 0; n < BR / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = n * 8 + 2 * cta.t + (e & 1), key = e < 2 ? key_a : key_b;
          float x = exp2f(p[n][e] * sl2 - ls[col]);
          if ((diag && r0 + col < key) || (edge && r0 + col >= key + a.window)) x = 0.f;
          p[n][e] = x;
          dp[n][e] = x * (dp[n][e] - ds[col]);  // dS^T
        }
      mma_pb<HSP, BR, LD>(dv, p, dos, cta.lane);
      mma_pb<HSP, BR, LD>(dk, dp, qs, cta.lane);
    });
  }

  store_rows<true, HSP>(a.dqkv + L.k(cta.b, kv), ld, dk, k0 + cta.warp * 16, T, hs, a.scale, a.scale, cta.lane);
  store_rows<true, HSP>(a.dqkv + L.v(cta.b, kv), ld, dv, k0 + cta.warp * 16, T, hs, 1.f, 1.f, cta.lane);
}

// dQ (query head h's columns of dqkv) += for the 64 query rows [q0, q0+64) of one (b, h), over
// the key tiles of h's kv head at or before them within their windows; each warp owns 16 rows. grid (B*NH, ceil(T/64)),
// y counting down as in the forward.
template <int HSP>
__global__ void __launch_bounds__(kThreads) dq_kernel(const BackwardArgs<bf16> a) {
  const Heads L = a.L;
  const int T = L.T, C = a.C, hs = L.hs;
  using G = Geometry<HSP>;
  constexpr int LD = G::kLd, BR = kOwnRows, BC = G::kBwdStream;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sq = reinterpret_cast<bf16*>(smem);  // [BR][LD]
  bf16* sdo = sq + BR * LD;                   // [BR][LD]
  bf16* sk = sdo + BR * LD;                   // [2][BC][LD]
  bf16* sv = sk + 2 * BC * LD;                // [2][BC][LD]

  const Cta cta(L.NH);
  const int h = cta.head, kv = L.kv_of(h);
  const size_t ld = L.ld(), bh = size_t(cta.b) * L.NH + h;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BR;
  const int row_a = q0 + cta.warp * 16 + cta.g, row_b = row_a + 8;
  const float* lse_bh = a.lse + bh * T;
  const float* d_bh = a.D + bh * T;
  // Rows past T get P = 0 (their results are not stored; this only keeps them finite).
  const float l_a = row_a < T ? lse_bh[row_a] * kLog2e : INFINITY, d_a = row_a < T ? d_bh[row_a] : 0.f;
  const float l_b = row_b < T ? lse_bh[row_b] * kLog2e : INFINITY, d_b = row_b < T ? d_bh[row_b] : 0.f;
  const float sl2 = a.scale * kLog2e;
  float dq[HSP / 8][4] = {};

  load_tile<BR, HSP>(sq, a.qkv + L.q(cta.b, h) + q0 * ld, ld, T - q0, hs);
  load_tile<BR, HSP>(sdo, a.dout + (size_t(cta.b) * T + q0) * C + size_t(h) * hs, size_t(C), T - q0, hs);
  stream_tiles(window_start(q0, a.window) / BC, (min(q0 + BR, T) - 1) / BC + 1,
               kv_loader<BC, HSP>(sk, sv, a.qkv + L.k(cta.b, kv), a.qkv + L.v(cta.b, kv), ld, T, hs),
               [&](int j, int stage) {
    const int k0 = j * BC;
    const bf16* ks = sk + stage * BC * LD;
    float p[BC / 8][4] = {}, dp[BC / 8][4] = {};
    mma_abt<BC, HSP, LD>(p, sq + cta.warp * 16 * LD, ks, cta.lane);
    mma_abt<BC, HSP, LD>(dp, sdo + cta.warp * 16 * LD, sv + stage * BC * LD, cta.lane);
    const bool diag = k0 + BC > q0, edge = k0 <= q0 + BR - 1 - a.window;  // as in the forward
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + n * 8 + 2 * cta.t + (e & 1);
        const bool lower = e >= 2;  // row b
        const int row = lower ? row_b : row_a;
        float x = exp2f(p[n][e] * sl2 - (lower ? l_b : l_a));
        if ((diag && key > row) || (edge && key <= row - a.window)) x = 0.f;
        dp[n][e] = x * (dp[n][e] - (lower ? d_b : d_a));  // dS
      }
    mma_pb<HSP, BC, LD>(dq, dp, ks, cta.lane);
  });

  store_rows<true, HSP>(a.dqkv + L.q(cta.b, h), ld, dq, q0 + cta.warp * 16, T, hs, a.scale, a.scale, cta.lane);
}

template <int HSP>
void backward(const BackwardArgs<bf16>& a, const Dims& d, cudaStream_t s) {
  using G = Geometry<HSP>;
  const unsigned tiles = unsigned((d.T + kOwnRows - 1) / kOwnRows);

  constexpr size_t dkdv_smem =
      size_t(2 * kOwnRows + 4 * G::kBwdStream) * G::kLd * sizeof(bf16) + 4 * G::kBwdStream * sizeof(float);
  allow_smem(dkdv_kernel<HSP>, dkdv_smem);
  dkdv_kernel<HSP><<<dim3(unsigned(d.B * d.NKV), tiles), kThreads, dkdv_smem, s>>>(a);
  check_launch("attention_backward dK/dV (bf16 mma)");

  constexpr size_t dq_smem = size_t(2 * kOwnRows + 4 * G::kBwdStream) * G::kLd * sizeof(bf16);
  allow_smem(dq_kernel<HSP>, dq_smem);
  dq_kernel<HSP><<<dim3(unsigned(d.B * d.NH), tiles), kThreads, dq_smem, s>>>(a);
  check_launch("attention_backward dQ (bf16 mma)");
}

}  // namespace

void backward_mma(const BackwardArgs<bf16>& a, const Dims& d, cudaStream_t s) {
  if (d.hs <= 32) backward<32>(a, d, s);
  else if (d.hs <= 64) backward<64>(a, d, s);
  else backward<128>(a, d, s);
}

}  // namespace zt::cuda::attn
