#include "tensor/cuda_allocator.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace zt {

namespace {

std::string cuda_error(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// The runtime is going away (tensors freed by static destructors at exit): it releases the memory
// itself, and nothing is worth a warning.
struct RuntimeUnloading : std::runtime_error {
  RuntimeUnloading() : std::runtime_error("the CUDA runtime is unloading") {}
};

[[noreturn]] void fail(cudaError_t e, int device, const std::string& what) {
  cudaGetLastError();  // not sticky: later checks must not see it again
  if (e == cudaErrorCudartUnloading) throw RuntimeUnloading();
  throw std::runtime_error("cuda:" + std::to_string(device) + " " + what + ": " + cuda_error(e));
}

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// The CUDA runtime under a BlockPool, with the pool's events: created on demand, kept for reuse,
// destroyed with the driver. Called with the device current (CudaAllocator sees to it).
class CudaDriver final : public BlockDriver {
 public:
  explicit CudaDriver(int device) : device_(device) {}
  ~CudaDriver() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  void* malloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    if (e != cudaSuccess) fail(e, device_, "cudaMalloc of " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free(void* p) noexcept override {
    const cudaError_t e = cudaFree(p);
    if (e != cudaSuccess && e != cudaErrorCudartUnloading)
      std::fprintf(stderr, "warning: cuda:%d cudaFree: %s\n", device_, cuda_error(e).c_str());
    if (e != cudaSuccess) cudaGetLastError();
  }
  Event record(Stream s) override {
    cudaEvent_t e = nullptr;
    if (events_.empty()) {
      const cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      if (r != cudaSuccess) fail(r, device_, "cudaEventCreateWithFlags");
    } else {
      e = events_.back();
      events_.pop_back();
    }
    const cudaError_t r = cudaEventRecord(e, s);
    if (r != cudaSuccess) {
      events_.push_back(e);
      fail(r, device_, "cudaEventRecord");
    }
    return e;
  }
  bool done(Event e) override {
    const cudaError_t r = cudaEventQuery(e);
    if (r == cudaErrorNotReady) return false;
    if (r != cudaSuccess) fail(r, device_, "cudaEventQuery");
    return true;
  }
  void wait(Event e) override {
    const cudaError_t r = cudaEventSynchronize(e);
    if (r != cudaSuccess) fail(r, device_, "cudaEventSynchronize");
  }
  void release(Event e) noexcept override { events_.push_back(e); }

 private:
  int device_;
  std::vector<cudaEvent_t> events_;
};

// Page-locked host memory (cudaHostAlloc, portable to every device), for staging device data: its
// copies need no bounce through a driver buffer. Charged to its own accounting, as host memory.
class CudaHostAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu; }
  void* allocate(size_t bytes, MemCategory c) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("pinned host allocation of " + std::to_string(bytes) + " bytes (" +
                               std::string(category_name(c)) + ") failed: " + cuda_error(e));
    }
    accounting_.add(c, bytes);
    return p;
  }
  void deallocate(void* p, size_t bytes, MemCategory c) override {
    if (!p) return;
    cudaFreeHost(p);
    accounting_.sub(c, bytes);
  }
};

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device), driver_(device), pool_(driver_) {}
  Device device() const override { return Device::cuda; }

  void* allocate(size_t bytes, MemCategory c) override {
    if (bytes == 0) return nullptr;
    CudaDeviceGuard on(device_);
    void* p = pool_.allocate(bytes, current_cuda_stream());
    if (!p) {
      const BlockPoolStats s = pool_.stats();
      throw std::runtime_error("cuda:" + std::to_string(device_) + " allocation of " + std::to_string(bytes) +
                               " bytes (" + std::string(category_name(c)) + ") failed: out of memory with " +
                               mib(s.reserved) + " reserved, " + mib(s.in_use) +
                               " in use (after returning the cache to the driver)");
    }
    accounting_.add(c, bytes);
    return p;
  }

  // Runs inside Storage's destructor, so it reports instead of throwing.
  void deallocate(void* p, size_t bytes, MemCategory c) override {
    if (!p) return;
    int current = -1;
    cudaGetDevice(&current);
    if (current != device_) cudaSetDevice(device_);
    try {
      pool_.free(p);
    } catch (const RuntimeUnloading&) {
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: cuda:%d free of %zu bytes (%s) kept out of the cache: %s\n", device_, bytes,
                   std::string(category_name(c)).c_str(), e.what());
    }
    if (current >= 0 && current != device_) cudaSetDevice(current);
    accounting_.sub(c, bytes);
  }

  void zero(void* p, size_t bytes) override {
    if (!bytes) return;
    CudaDeviceGuard on(device_);
    const cudaError_t e = cudaMemsetAsync(p, 0, bytes, current_cuda_stream());
    if (e != cudaSuccess) fail(e, device_, "memset of " + std::to_string(bytes) + " bytes");
  }

  // Staging copies (initialisation, tokens in, logits and losses out) rather than a step's
  // traffic, which moves through pinned buffers on the copy streams; so this one waits.
  void copy(void* dst, const void* src, size_t bytes, bool wait) override {
    if (!bytes) return;
    CudaDeviceGuard on(device_);
    cudaStream_t s = current_cuda_stream();
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
    if (e == cudaSuccess && wait) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) fail(e, device_, "copy of " + std::to_string(bytes) + " bytes");
  }

  Allocator& pinned_host() override {
    static auto* host = new CudaHostAllocator;  // never destroyed, like the device allocators
    return *host;
  }

  BlockPoolStats stats() const { return pool_.stats(); }
  size_t empty_cache() override {
    CudaDeviceGuard on(device_);
    return pool_.empty_cache();
  }

 private:
  int device_;
  CudaDriver driver_;
  BlockPool pool_;
};

CudaAllocator& instance(int device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::invalid_argument("cuda_allocator(" + std::to_string(device) + "): no CUDA device: " + cuda_error(e));
  }
  if (device < 0 || device >= count)
    throw std::invalid_argument("cuda_allocator(" + std::to_string(device) + "): this process sees " +
                                std::to_string(count) + " CUDA device(s)");
  // Never destroyed: tensors held by other static objects are freed at exit, after any static map
  // would be gone; the driver takes the memory back with the process.
  static std::mutex m;
  static auto* allocators = new std::map<int, std::unique_ptr<CudaAllocator>>;
  std::lock_guard lock(m);
  auto& a = (*allocators)[device];
  if (!a) a = std::make_unique<CudaAllocator>(device);
  return *a;
}

thread_local CUstream_st* t_stream = nullptr;

}  // namespace

CudaStreamScope::CudaStreamScope(CUstream_st* stream) : previous_(std::exchange(t_stream, stream)) {}
CudaStreamScope::~CudaStreamScope() { t_stream = previous_; }
CUstream_st* current_cuda_stream() { return t_stream; }

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

Allocator& cuda_allocator(int device) { return instance(device); }
BlockPoolStats cuda_allocator_stats(int device) { return instance(device).stats(); }
size_t cuda_empty_cache(int device) { return instance(device).empty_cache(); }

bool cuda_device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver, or an old one: not an error here
    return false;
  }
  return count > 0;
}

}  // namespace zt
