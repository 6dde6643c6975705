// BLIS (Debian's OpenMP build) runs each call in its caller's thread ([Note: one thread pool] in
// gemm_cblas.cpp). It reads BLIS_NUM_THREADS, not OMP_NUM_THREADS, so it is told so explicitly,
// when the library is loaded. Its threads would be libgomp's, which start only at the first
// parallel region, so none exists before runtime/cli/signals.cpp sets the signal mask.
#include <blis.h>

#include "kernels/cpu/gemm.hpp"

namespace zt::cpu {

namespace {

const bool kSingle = [] {
  bli_thread_set_num_threads(1);
  return true;
}();

}  // namespace

bool blas_single_threaded() { return kSingle; }

const char* gemm_library() { return "blis"; }

}  // namespace zt::cpu
