#include "tensor/cuda_allocator.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace zt {

namespace {

std::string cuda_error(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {}
  Device device() const override { return Device::cuda; }

  void* allocate(size_t bytes, MemCategory c) override {
    if (bytes == 0) return nullptr;
    CudaDeviceGuard on(device_);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // out of memory is not sticky; later checks must not see it again
      throw std::runtime_error("cuda:" + std::to_string(device_) + " allocation of " + std::to_string(bytes) +
                               " bytes (" + std::string(category_name(c)) + ") failed: " + cuda_error(e));
    }
    accounting_.add(c, bytes);
    return p;
  }

  // Runs inside Storage's destructor, so it reports instead of throwing. A runtime that is already
  // unloading (tensors freed by static destructors at exit) has released the memory itself.
  void deallocate(void* p, size_t bytes, MemCategory c) override {
    if (!p) return;
    int current = -1;
    cudaGetDevice(&current);
    if (current != device_) cudaSetDevice(device_);
    const cudaError_t e = cudaFree(p);
    if (current >= 0 && current != device_) cudaSetDevice(current);
    if (e != cudaSuccess && e != cudaErrorCudartUnloading)
      std::fprintf(stderr, "warning: cuda:%d free of %zu bytes (%s): %s\n", device_, bytes,
                   std::string(category_name(c)).c_str(), cuda_error(e).c_str());
    accounting_.sub(c, bytes);
  }

 private:
  int device_;
};

}  // namespace

CudaDeviceGuard::CudaDeviceGuard(int device) {
  int current = -1;
  cudaError_t e = cudaGetDevice(&current);
  if (e == cudaSuccess && current != device) {
    e = cudaSetDevice(device);
    previous_ = current;  // restored on destruction; -1 when `device` was current already
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("cannot make cuda:" + std::to_string(device) + " current: " + cuda_error(e));
  }
}

CudaDeviceGuard::~CudaDeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

Allocator& cuda_allocator(int device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::invalid_argument("cuda_allocator(" + std::to_string(device) + "): no CUDA device: " + cuda_error(e));
  }
  if (device < 0 || device >= count)
    throw std::invalid_argument("cuda_allocator(" + std::to_string(device) + "): this process sees " +
                                std::to_string(count) + " CUDA device(s)");
  static std::mutex m;
  static std::map<int, std::unique_ptr<CudaAllocator>> allocators;
  std::lock_guard lock(m);
  auto& a = allocators[device];
  if (!a) a = std::make_unique<CudaAllocator>(device);
  return *a;
}

bool cuda_device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver, or an old one: not an error here
    return false;
  }
  return count > 0;
}

}  // namespace zt
