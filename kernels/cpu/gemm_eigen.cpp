// sgemm through Eigen's own product (-Dblas=eigen): no BLAS to install, its SGEMM about 1.2x slower here.
// Eigen threads its GEMM with OpenMP, so it follows omp_set_num_threads by itself.
#include <Eigen/Core>

#include "kernels/cpu/eigen_maps.hpp"
#include "kernels/cpu/gemm.hpp"

namespace zt::cpu {

void sgemm(bool t_a, bool t_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
           float* C, int ldc) {
  using Stride = Eigen::OuterStride<>;
  StridedMap c(C, M, N, Stride(ldc));
  // op(A) is A (M,K) as stored, or the transpose of a stored (K,M); the same for op(B).
  ConstStridedMap a(A, t_a ? K : M, t_a ? M : K, Stride(lda));
  ConstStridedMap b(B, t_b ? N : K, t_b ? K : N, Stride(ldb));
  if (beta == 0.0f) c.setZero();
  else if (beta != 1.0f) c *= beta;
  if (t_a && t_b) c.noalias() += a.transpose() * b.transpose();
  else if (t_a) c.noalias() += a.transpose() * b;
  else if (t_b) c.noalias() += a * b.transpose();
  else c.noalias() += a * b;
}

const char* gemm_library() { return "eigen"; }

}  // namespace zt::cpu
