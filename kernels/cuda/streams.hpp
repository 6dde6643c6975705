// Streams by role, the events that order them, and NVTX ranges: [Note: streams by role].
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

namespace zt::cuda {

// A non-blocking stream on the current device, destroyed with its owner.
class Stream {
 public:
  // priority: lower numbers run first where the device has a choice (cudaDeviceGetStreamPriorityRange).
  explicit Stream(int priority = 0);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// An event without timing (the cheapest kind), for ordering; with `timing` for measuring.
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

  void record(cudaStream_t s);
  // Makes `s` wait (on the device) for the work recorded before this event.
  void wait_on(cudaStream_t s) const;
  bool done() const;  // cudaEventQuery
  void synchronize() const;
  // Milliseconds from `start` to this event (both timing events, both complete).
  float since(const Event& start) const;

 private:
  cudaEvent_t e_ = nullptr;
};

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
