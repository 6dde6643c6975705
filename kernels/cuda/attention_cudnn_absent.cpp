// A CUDA build without cuDNN or its frontend headers (meson found neither libcudnn with cudnn.h
// nor the cudnn_frontend pkg-config file, or -Dcudnn=disabled): train.attention "cudnn" is
// refused by name here, and the config check says so before a run starts.
#include <stdexcept>

#include "kernels/cuda/attention_cudnn.hpp"

namespace zt::cuda::cudnn {

namespace {

[[noreturn]] void absent() {
  throw std::invalid_argument(
      "cudnn attention: this ztrain was built without cuDNN (libcudnn and the cudnn_frontend headers, "
      "scripts/install-deps.sh); train.attention \"ztrain\" runs our own kernels");
}

}  // namespace

bool available() { return false; }

void attention_forward(bf16*, float*, const bf16*, int, int, int, int, int, const AttentionOptions&, const Workspace&,
                       cudaStream_t) {
  absent();
}

void attention_backward(bf16*, const bf16*, const bf16*, const bf16*, const float*, int, int, int, int, int,
                        const AttentionOptions&, const Workspace&, cudaStream_t) {
  absent();
}

}  // namespace zt::cuda::cudnn
