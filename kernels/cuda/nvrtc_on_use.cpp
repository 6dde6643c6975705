// NVRTC's functions that the cuDNN frontend's headers call (its engines that compile kernels at
// run time), defined here so that the process links no NVRTC: each opens the library on its
// first call and forwards ([Note: GPU libraries on first use] in kernels/cuda/lazy_library.hpp).
// Signatures are nvrtc.h's; a missing library is NVRTC_ERROR_INTERNAL_ERROR, which the frontend
// reports as a failed engine.
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <string>
#include <type_traits>

#include "kernels/cuda/lazy_library.hpp"

namespace {

const zt::cuda::LazyLibrary& nvrtc() {
  static const zt::cuda::LazyLibrary lib("libnvrtc.so." + std::to_string(CUDART_VERSION / 1000), "NVRTC");
  return lib;
}

// Calls NVRTC's `name` with the arguments, or says NVRTC is not there.
template <class F, class... A>
nvrtcResult forward(const char* name, A... args) {
  try {
    static F* const f = nvrtc().get<F>(name);
    return f(args...);
  } catch (...) {
    return NVRTC_ERROR_INTERNAL_ERROR;
  }
}

}  // namespace

extern "C" {

nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int numHeaders,
                               const char* const* headers, const char* const* includeNames) {
  return forward<decltype(nvrtcCreateProgram)>("nvrtcCreateProgram", prog, src, name, numHeaders, headers, includeNames);
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
  return forward<decltype(nvrtcDestroyProgram)>("nvrtcDestroyProgram", prog);
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char* const* options) {
  return forward<decltype(nvrtcCompileProgram)>("nvrtcCompileProgram", prog, numOptions, options);
}
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* cubinSizeRet) {
  return forward<decltype(nvrtcGetCUBINSize)>("nvrtcGetCUBINSize", prog, cubinSizeRet);
}
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin) {
  return forward<decltype(nvrtcGetCUBIN)>("nvrtcGetCUBIN", prog, cubin);
}
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* logSizeRet) {
  return forward<decltype(nvrtcGetProgramLogSize)>("nvrtcGetProgramLogSize", prog, logSizeRet);
}
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log) {
  return forward<decltype(nvrtcGetProgramLog)>("nvrtcGetProgramLog", prog, log);
}

}  // extern "C"
