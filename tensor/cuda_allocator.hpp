// Device memory: a caching allocator per device, charged to the same per-category accounting as
// host memory (MemAccounting), so a rank reports what its GPU holds the way it reports its host.
// Memory comes from the driver in segments (tensor/block_pool.hpp) and freed blocks are kept and
// handed out again, so a training step after the first calls neither cudaMalloc nor cudaFree.
// Reuse across streams follows [Note: stream-ordered reuse] in tensor/block_pool.cpp.
//
// Built where the CUDA toolkit is found (ZT_HAVE_CUDA); nothing here includes a CUDA header.
#pragma once

#include <cstddef>

#include "tensor/allocator.hpp"
#include "tensor/block_pool.hpp"

namespace zt {

// The allocator of device `device` (0 <= device < the number of devices), created on first use and
// living for the process. Throws std::invalid_argument for an index that names no device.
// allocate() throws std::runtime_error naming the size, the category and what the device's cache
// holds when the device has no room even after the cache went back to the driver.
Allocator& cuda_allocator(int device);

// The counters of device `device`'s cache (bytes reserved from the driver, in use, cudaMalloc
// calls, cache hits).
BlockPoolStats cuda_allocator_stats(int device);
// Returns the segments of `device` that hold no live block to the driver (waiting for the work
// queued on them first); returns the bytes released.
size_t cuda_empty_cache(int device);

// The stream that device memory allocated on this thread is for (nullptr: the legacy default
// stream), set for a scope and restored on destruction. The stream must belong to the device
// allocated from.
class CudaStreamScope {
 public:
  explicit CudaStreamScope(CUstream_st* stream);
  ~CudaStreamScope();
  CudaStreamScope(const CudaStreamScope&) = delete;
  CudaStreamScope& operator=(const CudaStreamScope&) = delete;

 private:
  CUstream_st* previous_;
};
CUstream_st* current_cuda_stream();

// Whether this process sees a CUDA device. False, not an exception, where the driver is missing
// or too old: callers (and tests, which exit 77) choose another path.
bool cuda_device_available();

// Makes `device` current for the calling thread and restores the previous one on destruction,
// so that a library call lands on the right device without changing the caller's.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace zt
