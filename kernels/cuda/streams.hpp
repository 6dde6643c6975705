// Streams by role, the events that order them, and NVTX ranges: [Note: streams by role]. The
// Stream and Event owners themselves are tensor/cuda_stream.hpp's, which the NCCL communicator
// uses too.
//
// [Note: streams by role] A rank's GPU work runs on one stream per role: compute (kernels and
// GEMMs), all_gather and reduce_scatter (NCCL), h2d and d2h (copies through pinned buffers for
// offload). Work on one role that needs another's result waits on an Event recorded after it
// (cudaStreamWaitEvent: the device orders them, the host does not block), never on a device-wide
// synchronisation; the host waits only on an event, and only where it needs data (a loss value,
// an overflow flag). Streams are created non-blocking, so the legacy default stream orders
// nothing behind their backs. NVTX ranges name every phase in Nsight Systems' timeline at no cost
// when no tool is attached.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <string>

#include "tensor/cuda_stream.hpp"

namespace zt::cuda {

enum class StreamRole : int { compute, all_gather, reduce_scatter, h2d, d2h };
constexpr int kStreamRoles = 5;
const char* stream_role_name(StreamRole r);

// A rank's streams, one per role, on the device current at construction. Collectives get the
// device's highest priority, so a gather the next layer waits for is not queued behind kernels.
class RoleStreams {
 public:
  RoleStreams();
  cudaStream_t operator[](StreamRole r) const { return streams_[static_cast<int>(r)]->get(); }
  // `to` waits for what `from` has queued so far (through an event of `from`'s own).
  void order(StreamRole from, StreamRole to);

 private:
  std::array<std::unique_ptr<Stream>, kStreamRoles> streams_;
  std::array<std::unique_ptr<Event>, kStreamRoles> events_;
};

// An NVTX range for the lifetime of the object ("forward h3", "reduce_scatter h3", ...).
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace zt::cuda
