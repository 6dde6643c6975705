// A GPU library opened the first time a run needs it. [Note: GPU libraries on first use]
//
// [Note: GPU libraries on first use] Linked the usual way, cuBLASLt (540 MB on disk) and NVRTC are
// mapped and relocated when the process starts, and their initialisers touch their data: 240 MiB
// of resident memory in every run, a CPU run's and `ztrain --version`'s alike, which hid what a
// small run's activations cost (issue 42: with activation checkpointing the metrics' activation
// peak fell by 36 MiB and the resident set not at all). They are opened with dlopen instead, the
// first time a GEMM on a GPU (cuBLASLt) or cuDNN's attention (NVRTC, which the cuDNN frontend's
// headers call) needs them, as PyTorch opens NVRTC; a missing library is then an error naming it.
// The small runtime libraries (cudart, NCCL, cuDNN's own loader) stay linked.
#pragma once

#include <string>

namespace zt::cuda {

class LazyLibrary {
 public:
  // `soname` as the toolkit installs it ("libcublasLt.so.13"); `what` names it in errors.
  LazyLibrary(std::string soname, std::string what);
  ~LazyLibrary();
  LazyLibrary(const LazyLibrary&) = delete;
  LazyLibrary& operator=(const LazyLibrary&) = delete;

  // The function `name`, opening the library on the first call (thread-safe); CudaError naming the
  // library and dlerror()'s reason when it or the function cannot be found.
  template <class F>
  F* get(const char* name) const {
    return reinterpret_cast<F*>(symbol(name));
  }

 private:
  void* symbol(const char* name) const;

  std::string soname_, what_;
  mutable void* handle_ = nullptr;
};

}  // namespace zt::cuda
