// CUDA streams and events as RAII owners, and the error a failed CUDA runtime call throws: one
// set for the kernels (kernels/cuda/streams.hpp builds streams by role on them) and for the NCCL
// communicator (comm/nccl_communicator.cpp). It lives here, beside the device allocator, because
// both layers may use tensor/ and comm/ may not use kernels/ (shared/DESIGN.md's layers).
//
// Errors: CudaError names the call ("cudaEventRecord: cudaErrorInvalidResourceHandle: invalid
// resource handle"); a caller with more to say (the NCCL communicator: the rank and the operation)
// catches it and throws its own error around what() (a member initializer's failure can be taken
// up by a function-try-block around the constructor).
//
// Built where the CUDA runtime is found (ZT_HAVE_CUDA), like cuda_allocator.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>

namespace zt::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws CudaError "<what>: <name>: <description>" unless e is cudaSuccess (clearing a non-sticky
// error first, so that later checks report their own).
void check(cudaError_t e, const char* what);

// A non-blocking stream on the current device, destroyed with its owner: work on it does not
// serialize with the legacy default stream, so whoever needs that order records it with an Event.
class Stream {
 public:
  // priority: lower numbers run first where the device has a choice (cudaDeviceGetStreamPriorityRange).
  explicit Stream(int priority = 0);
  ~Stream();  // returns at once; work still queued completes
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// An event without timing (the cheapest kind), for ordering; with `timing` for measuring. Movable
// (a Work carries the event of its operation), the moved-from event holds nothing.
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

  void record(cudaStream_t s);
  // Makes `s` wait (on the device) for the work recorded before this event.
  void wait_on(cudaStream_t s) const;
  bool done() const;  // cudaEventQuery: false while the recorded work runs
  void synchronize() const;
  // Milliseconds from `start` to this event (both timing events, both complete).
  float since(const Event& start) const;

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace zt::cuda
