// The CPU's large matrix products, through the BLAS the build chose (meson -Dblas=openblas|blis|
// eigen; gemm_cblas.cpp with one small file per library, or gemm_eigen.cpp). Eigen stays the
// array layer everywhere else; only these GEMMs, ~85% of a GPT-2 step, leave it.
#pragma once

namespace zt::cpu {

// Row-major C (M,N) = op(A) (M,K) · op(B) (K,N) + beta · C, where op transposes when t_a / t_b is
// set; lda / ldb / ldc are the row strides of A, B and C as stored. Threads: OpenMP's, as many as
// omp_get_max_threads (one inside a parallel region). Deterministic for a given thread count.
void sgemm(bool t_a, bool t_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
           float* C, int ldc);

// "openblas", "blis" or "eigen": reported in the run banner and the benchmarks.
const char* gemm_library();

}  // namespace zt::cpu
