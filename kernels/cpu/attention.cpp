#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt::cpu {

// One (b, h) pair per task: its q, k, v are hs-wide column blocks of qkv with row stride 3C, and
// its output a column block of out with row stride C, so tasks never write the same memory. The
// T×T products are computed whole and masked: at GPT-2's T the GEMM's speed beats skipping the
// upper triangle by hand.

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const float* base = qkv + static_cast<size_t>(b) * T * 3 * C + static_cast<size_t>(h) * hs;
      ConstStridedMap q(base, T, hs, Eigen::OuterStride<>(3 * C));
      ConstStridedMap k(base + C, T, hs, Eigen::OuterStride<>(3 * C));
      ConstStridedMap v(base + 2 * C, T, hs, Eigen::OuterStride<>(3 * C));
      MatMap p(att + (static_cast<size_t>(b) * NH + h) * T * T, T, T);
      p.noalias() = (q * k.transpose()) * scale;
      for (int t = 0; t < T; ++t) {
        auto row = p.row(t);
        const float mx = row.head(t + 1).maxCoeff();
        row.head(t + 1) = (row.head(t + 1).array() - mx).exp();
        row.head(t + 1) /= row.head(t + 1).sum();
        row.tail(T - t - 1).setZero();
      }
      StridedMap y(out + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs, T, hs,
                   Eigen::OuterStride<>(C));
      y.noalias() = p * v;
    }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                        int C, int NH) {
  if (!dqkv) return;
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    RowMat ds(T, T);  // per-thread scratch: d(probabilities), then d(scores)
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) {
        const size_t off = static_cast<size_t>(b) * T * 3 * C + static_cast<size_t>(h) * hs;
        const Eigen::OuterStride<> s3(3 * C);
        ConstStridedMap q(qkv + off, T, hs, s3), k(qkv + off + C, T, hs, s3), v(qkv + off + 2 * C, T, hs, s3);
        StridedMap dq(dqkv + off, T, hs, s3), dk(dqkv + off + C, T, hs, s3), dv(dqkv + off + 2 * C, T, hs, s3);
        ConstStridedMap dy(dout + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * hs, T, hs,
                           Eigen::OuterStride<>(C));
        ConstMatMap p(att + (static_cast<size_t>(b) * NH + h) * T * T, T, T);
        dv.noalias() += p.transpose() * dy;
        ds.noalias() = dy * v.transpose();
        // Softmax backward per row: ds = p * (dp - sum(p * dp)); zero where p is masked.
        for (int t = 0; t < T; ++t) {
          const float dot = p.row(t).head(t + 1).dot(ds.row(t).head(t + 1));
          ds.row(t).head(t + 1) = (p.row(t).head(t + 1).array() * (ds.row(t).head(t + 1).array() - dot)) * scale;
          ds.row(t).tail(T - t - 1).setZero();
        }
        dq.noalias() += ds * k;
        dk.noalias() += ds.transpose() * q;
      }
  }
}

}  // namespace zt::cpu
