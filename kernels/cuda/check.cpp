#include <string>

#include "kernels/cuda/kernels.hpp"

namespace zt::cuda {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that later checks report their own
  throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace zt::cuda
