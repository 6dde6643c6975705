// sgemm through the CBLAS interface, which OpenBLAS and BLIS both export; the build puts the chosen
// library's own cblas.h first on the include path (kernels/meson.build, -Dblas).
//
// [Note: one thread pool] The library runs single-threaded (blas_single_threaded, one per library
// file, from the moment it is loaded), and ztrain threads the product itself with OpenMP: C is cut into one block per thread
// along its longer side, and each thread multiplies its block with the full K. OpenBLAS's own
// pool would spin beside OpenMP's after every call, and on 2 cores that doubled the layernorm,
// residual and attention time between the GEMMs (4.1% → 1.1% for layernorm alone) and ate all that
// the faster GEMM won; BLIS's OpenMP build shares libgomp's pool but threads no better. Cutting
// along M or N (never K) keeps every element's sum in one thread, in the library's own order, so
// the numbers depend on the thread count only.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include "kernels/cpu/gemm.hpp"

namespace zt::cpu {

// True once the library runs each call in its caller's thread; set when the library file's own
// object is loaded (gemm_openblas.cpp or gemm_blis.cpp), and called here so a static link keeps it.
bool blas_single_threaded();

namespace {

// Blocks start on multiples of this many rows or columns: whole micro-tiles of either library's
// kernels (at most 16 wide in AVX-512 single precision), so no thread gets a ragged edge inside.
constexpr int kBlockAlign = 64;

void sgemm_block(bool t_a, bool t_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
                 float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, t_a ? CblasTrans : CblasNoTrans, t_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda,
              B, ldb, beta, C, ldc);
}

}  // namespace

void sgemm(bool t_a, bool t_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
           float* C, int ldc) {
  if (!blas_single_threaded()) throw std::logic_error("sgemm: the BLAS was not made single-threaded at load");
  const bool by_rows = M >= N;
  const int len = by_rows ? M : N;
  const int parts = std::min(omp_in_parallel() ? 1 : omp_get_max_threads(), (len + kBlockAlign - 1) / kBlockAlign);
  if (parts <= 1) {
    sgemm_block(t_a, t_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const int tiles = (len + kBlockAlign - 1) / kBlockAlign;
#pragma omp parallel num_threads(parts)
  {
    const int p = omp_get_thread_num();
    const int lo = std::min(len, tiles * p / parts * kBlockAlign), hi = std::min(len, tiles * (p + 1) / parts * kBlockAlign);
    if (hi > lo) {
      const auto off = static_cast<size_t>(lo);
      if (by_rows)  // rows lo..hi of C, and of op(A): rows of A as stored, or its columns
        sgemm_block(t_a, t_b, hi - lo, N, K, t_a ? A + off : A + off * lda, lda, B, ldb, beta, C + off * ldc, ldc);
      else  // columns lo..hi of C, and of op(B): columns of B as stored, or its rows
        sgemm_block(t_a, t_b, M, hi - lo, K, A, lda, t_b ? B + off * ldb : B + off, ldb, beta, C + off, ldc);
    }
  }
}

}  // namespace zt::cpu
