#include "kernels/cuda/streams.hpp"

#include <nvtx3/nvToolsExt.h>

namespace zt::cuda {

const char* stream_role_name(StreamRole r) {
  static constexpr const char* names[kStreamRoles] = {"compute", "all_gather", "reduce_scatter", "h2d", "d2h"};
  return names[static_cast<int>(r)];
}

RoleStreams::RoleStreams() {
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  for (int r = 0; r < kStreamRoles; ++r) {
    const bool collective = r == static_cast<int>(StreamRole::all_gather) || r == static_cast<int>(StreamRole::reduce_scatter);
    streams_[r] = std::make_unique<Stream>(collective ? greatest : least);
    events_[r] = std::make_unique<Event>();
  }
}

void RoleStreams::order(StreamRole from, StreamRole to) {
  Event& e = *events_[static_cast<int>(from)];
  e.record((*this)[from]);
  e.wait_on((*this)[to]);
}

NvtxRange::NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }

}  // namespace zt::cuda
