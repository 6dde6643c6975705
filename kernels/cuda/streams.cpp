#include "kernels/cuda/streams.hpp"

#include <nvtx3/nvToolsExt.h>

#include <cstdio>

#include "kernels/cuda/kernels.hpp"

namespace zt::cuda {

namespace {
// Destructors report instead of throwing; a runtime already unloading at exit has freed it all.
void report(cudaError_t e, const char* what) {
  if (e != cudaSuccess && e != cudaErrorCudartUnloading)
    std::fprintf(stderr, "warning: %s: %s\n", what, cudaGetErrorString(e));
}
}  // namespace

Stream::Stream(int priority) { check(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, priority), "cudaStreamCreate"); }
Stream::~Stream() { report(cudaStreamDestroy(s_), "cudaStreamDestroy"); }

Event::Event(bool timing) {
  check(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming), "cudaEventCreate");
}
Event::~Event() { report(cudaEventDestroy(e_), "cudaEventDestroy"); }
void Event::record(cudaStream_t s) { check(cudaEventRecord(e_, s), "cudaEventRecord"); }
void Event::wait_on(cudaStream_t s) const { check(cudaStreamWaitEvent(s, e_, 0), "cudaStreamWaitEvent"); }
bool Event::done() const {
  const cudaError_t e = cudaEventQuery(e_);
  if (e == cudaErrorNotReady) return false;
  check(e, "cudaEventQuery");
  return true;
}
void Event::synchronize() const { check(cudaEventSynchronize(e_), "cudaEventSynchronize"); }
float Event::since(const Event& start) const {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start.e_, e_), "cudaEventElapsedTime");
  return ms;
}

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
