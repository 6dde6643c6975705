// OpenBLAS (Debian's pthread build) runs each call in its caller's thread ([Note: one thread pool]
// in gemm_cblas.cpp). Its pool is not only left asleep but stopped, when the library is loaded:
// OpenBLAS starts it from its own constructor, before main, so its threads never see the signal
// mask that runtime/cli/signals.cpp sets, and a SIGTERM the kernel handed to one of them would kill
// the process without its cleanup. (The serial build has no pool, but without its USE_LOCKING
// option, which Debian's lacks, it is not safe to call from two threads at once.)
#include <cblas.h>

#include "kernels/cpu/gemm.hpp"

extern "C" int blas_thread_shutdown_(void);  // exported by OpenBLAS's pthread build, not declared

namespace zt::cpu {

namespace {

// One thread per call means the pool is never needed again (OpenBLAS restarts it only for a
// multi-threaded call). Runs after OpenBLAS's constructor: the library is loaded before its users.
const bool kPoolStopped = [] {
  openblas_set_num_threads(1);
  blas_thread_shutdown_();
  return true;
}();

}  // namespace

bool blas_single_threaded() { return kPoolStopped; }

const char* gemm_library() { return "openblas"; }

}  // namespace zt::cpu
