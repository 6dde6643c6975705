#include "kernels/cuda/kernels.hpp"

namespace zt::cuda {

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace zt::cuda
