// OpenBLAS (Debian's pthread build) runs each call in its caller's thread ([Note: one thread pool]
// in gemm_cblas.cpp). Its pool is not only left asleep but stopped, when the library is loaded:
// OpenBLAS starts it from its own constructor, before main, so its threads never see the signal
// mask that runtime/cli/signals.cpp sets, and a SIGTERM the kernel handed to one of them would kill
// the process without its cleanup. (The serial build has no pool, but without its USE_LOCKING
// option, which Debian's lacks, it is not safe to call from two threads at once.)
//
// [Note: OpenBLAS's core] Its DYNAMIC_ARCH build picks kernels by the CPU's family and model, and a
// CPU newer than the library (Debian 12's 0.3.21 on Emerald Rapids, model 207) falls back to
// "Prescott": plain SSE3 kernels at 28 GFLOP/s on 2 cores where SkylakeX's reach 197 (measured
// with build/bench/sgemm, OPENBLAS_CORETYPE set and not). Unless the user chose a core
// (OPENBLAS_CORETYPE), such a fallback is redone for the kernels the CPU's features allow:
// SkylakeX with AVX-512 F/BW/DQ/VL, Haswell with AVX2 and FMA. OpenBLAS reads the choice only in
// its dynamic init, which it exports with its quit; no BLAS call has run yet.
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cpu/gemm.hpp"

extern "C" {
int blas_thread_shutdown_(void);  // exported by OpenBLAS's pthread build, not declared
void gotoblas_dynamic_init(void);  // DYNAMIC_ARCH's, likewise
void gotoblas_dynamic_quit(void);
}

namespace zt::cpu {

namespace {

// One thread per call means the pool is never needed again (OpenBLAS restarts it only for a
// multi-threaded call). Runs after OpenBLAS's constructor: the library is loaded before its users.
const bool kPoolStopped = [] {
  openblas_set_num_threads(1);
  blas_thread_shutdown_();
  return true;
}();

// [Note: OpenBLAS's core]; the name of the core it runs, and what was redone, for the banner.
const std::string kCore = [] {
  const std::string detected = openblas_get_corename();
#if defined(__x86_64__)
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  if (detected == "Prescott" && better && !std::getenv("OPENBLAS_CORETYPE")) {
    setenv("OPENBLAS_CORETYPE", better, 0);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");  // the choice is made; children choose for themselves
    return std::string(openblas_get_corename()) + " kernels; OpenBLAS took this CPU for " + detected;
  }
#endif
  return detected + " kernels";
}();

const std::string kName = "openblas (" + kCore + ")";

}  // namespace

bool blas_single_threaded() { return kPoolStopped; }

const char* gemm_library() { return kName.c_str(); }

}  // namespace zt::cpu
