// A build without NCCL: asking for it (train.device "cuda") says so.
#include "comm/nccl_communicator.hpp"

namespace zt {

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap) {
  throw CommError("rank " + std::to_string(bootstrap.rank()) +
                  ": device cuda needs a CUDA device and NCCL, but this ztrain was built without NCCL "
                  "(meson -Dcuda=enabled with NCCL installed beside the CUDA toolkit)");
}

}  // namespace zt
