#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

// Heads are grouped-query: NH query heads share NKV key/value heads, query head h reading kv head
// h / (NH / NKV) (NKV = NH: GPT-2's multi-head attention). A row of qkv (B,T,(NH+2*NKV)*hs) holds
// the query heads, then the key heads, then the value heads; out (B,T,NH*hs). The forward runs one
// (b, h) per task; the backward one (b, kv head) per task, which adds its group's query heads' dk
// and dv in head order, so no two tasks write the same memory and the sums repeat bit for bit.
// The products run through sgemm (single-threaded inside the task) over blocks of kRows query
// rows: rows r0..r1 attend to keys 0..r1 only, so the causal mask's upper triangle is skipped a
// block at a time (at T = 256, 10/16 of the full T×T work) and never written but as zeros. A
// sliding window ([Note: sliding window] in kernels/attention_options.hpp) skips, the same way,
// the keys before the block's first row's window, and zeroes each row's probabilities (and their
// gradients) before its own.

namespace {

constexpr int kRows = 64;

// The first key query row t sees: 0 without a window (W = T).
int first_key(int t, int W) { return std::max(0, t - W + 1); }

// The rows of a (T, ld)-strided head view starting at row r.
const float* rows(const float* base, int r, int ld) { return base + static_cast<size_t>(r) * ld; }
float* rows(float* base, int r, int ld) { return base + static_cast<size_t>(r) * ld; }

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int NH, int NKV, int hs,
                       const AttentionOptions& opt) {
  const int ld = (NH + 2 * NKV) * hs, C = NH * hs, group = NH / NKV;
  const float scale = attention_scale(opt, hs);
  const int W = attention_window(opt, T);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const float* row0 = qkv + static_cast<size_t>(b) * T * ld;
      const float* q = row0 + static_cast<size_t>(h) * hs;
      const float* k = row0 + static_cast<size_t>(NH + h / group) * hs;
      const float* v = k + static_cast<size_t>(NKV) * hs;
      float* p = att + (static_cast<size_t>(b) * NH + h) * T * T;
      float* y = out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs;
      for (int r0 = 0; r0 < T; r0 += kRows) {
        const int r1 = std::min(T, r0 + kRows), n = r1 - r0, k0 = first_key(r0, W);
        sgemm(false, true, n, r1 - k0, hs, rows(q, r0, ld), ld, rows(k, k0, ld), ld, 0.0f, rows(p, r0, T) + k0,
              T);  // scores q·kᵀ
        for (int t = r0; t < r1; ++t) {
          const int lo = first_key(t, W);
          Eigen::Map<Eigen::ArrayXf> row(rows(p, t, T) + lo, t + 1 - lo);
          const float mx = row.maxCoeff();
          row = ((row - mx) * scale).exp();
          row /= row.sum();
          std::fill(rows(p, t, T), rows(p, t, T) + lo, 0.0f);
          std::fill(rows(p, t, T) + t + 1, rows(p, t, T) + T, 0.0f);
        }
        sgemm(false, false, n, hs, r1 - k0, rows(p, r0, T) + k0, T, rows(v, k0, ld), ld, 0.0f, rows(y, r0, C),
              C);  // y = p·v
      }
    }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int NH,
                        int NKV, int hs, const AttentionOptions& opt) {
  if (!dqkv) return;
  const int ld = (NH + 2 * NKV) * hs, C = NH * hs, group = NH / NKV;
  const float scale = attention_scale(opt, hs);
  const int W = attention_window(opt, T);
#pragma omp parallel
  {
    RowMat ds(T, T);  // per-thread scratch: d(probabilities), then d(scores); lower triangle only
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b)
      for (int g = 0; g < NKV; ++g) {
        const size_t off = static_cast<size_t>(b) * T * ld;
        const float *k = qkv + off + static_cast<size_t>(NH + g) * hs, *v = k + static_cast<size_t>(NKV) * hs;
        float *dk = dqkv + off + static_cast<size_t>(NH + g) * hs, *dv = dk + static_cast<size_t>(NKV) * hs;
        for (int h = g * group; h < (g + 1) * group; ++h) {
          const float* q = qkv + off + static_cast<size_t>(h) * hs;
          float* dq = dqkv + off + static_cast<size_t>(h) * hs;
          const float* dy = dout + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs;
          const float* p = att + (static_cast<size_t>(b) * NH + h) * T * T;
          // Per block of query rows: ds = dy·vᵀ over the keys they see, then the softmax backward
          // per row, ds = p ⊙ (dp − Σ p ⊙ dp) · scale, and dq += ds·k.
          for (int r0 = 0; r0 < T; r0 += kRows) {
            const int r1 = std::min(T, r0 + kRows), n = r1 - r0, k0 = first_key(r0, W);
            sgemm(false, true, n, r1 - k0, hs, rows(dy, r0, C), C, rows(v, k0, ld), ld, 0.0f, &ds(r0, k0), T);
            for (int t = r0; t < r1; ++t) {
              const int lo = first_key(t, W);
              Eigen::Map<const Eigen::ArrayXf> pr(rows(p, t, T) + lo, t + 1 - lo);
              Eigen::Map<Eigen::ArrayXf> dr(&ds(t, lo), t + 1 - lo);
              const float dot = (pr * dr).sum();
              dr = pr * (dr - dot) * scale;
              std::fill(&ds(t, 0), &ds(t, 0) + lo, 0.0f);          // before the window (read below)
              std::fill(&ds(t, 0) + t + 1, &ds(t, 0) + r1, 0.0f);  // the block's masked corner
            }
            sgemm(false, false, n, hs, r1 - k0, &ds(r0, k0), T, rows(k, k0, ld), ld, 1.0f, rows(dq, r0, ld), ld);
          }
          // Per block of key rows c0..c1, seen by query rows c0..c1-1+W (within T): dv += pᵀ·dy and
          // dk += dsᵀ·q.
          for (int c0 = 0; c0 < T; c0 += kRows) {
            const int c1 = std::min(T, c0 + kRows), n = c1 - c0, m = std::min(T, c1 - 1 + W) - c0;
            sgemm(true, false, n, hs, m, rows(p, c0, T) + c0, T, rows(dy, c0, C), C, 1.0f, rows(dv, c0, ld), ld);
            sgemm(true, false, n, hs, m, &ds(c0, c0), T, rows(q, c0, ld), ld, 1.0f, rows(dk, c0, ld), ld);
          }
        }
      }
  }
}

}  // namespace zt::cpu
