#include "tensor/cuda_stream.hpp"

#include <cstdio>
#include <string>
#include <utility>

namespace zt::cuda {

namespace {
// Destructors report instead of throwing; a runtime already unloading at exit has freed it all.
void report(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  if (e != cudaErrorCudartUnloading) std::fprintf(stderr, "warning: %s: %s\n", what, cudaGetErrorString(e));
}
}  // namespace

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that later checks report their own
  throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

Stream::Stream(int priority) {
  check(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, priority), "cudaStreamCreateWithPriority");
}
Stream::~Stream() { report(cudaStreamDestroy(s_), "cudaStreamDestroy"); }

Event::Event(bool timing) {
  check(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming), "cudaEventCreateWithFlags");
}
Event::~Event() {
  if (e_) report(cudaEventDestroy(e_), "cudaEventDestroy");
}
Event::Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (e_) report(cudaEventDestroy(e_), "cudaEventDestroy");
    e_ = std::exchange(o.e_, nullptr);
  }
  return *this;
}

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

}  // namespace zt::cuda
