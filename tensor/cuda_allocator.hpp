// Device memory: cudaMalloc/cudaFree per device, charged to the same per-category accounting as
// host memory (MemAccounting), so a rank reports what its GPU holds the way it reports its host.
// Plain cudaMalloc for now; a caching allocator can replace it behind the same Allocator.
//
// Built where the CUDA toolkit is found (ZT_HAVE_CUDA); nothing here includes a CUDA header.
#pragma once

#include "tensor/allocator.hpp"

namespace zt {

// The allocator of device `device` (0 <= device < the number of devices), created on first use and
// living for the process. Throws std::invalid_argument for an index that names no device.
Allocator& cuda_allocator(int device);

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
