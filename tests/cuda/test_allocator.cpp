// The caching device allocator (tensor/cuda_allocator.hpp) on the GPU: a repeated step reuses
// its blocks without cudaMalloc, blocks split and merge, per-category accounting, reuse across
// streams waits for the work queued before the free, empty_cache, and a request larger than the
// device is a clear error. Each test starts from an empty cache. (The bookkeeping itself is
// tested without a GPU in tests/test_block_pool.cpp.)
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tensor/cuda_allocator.hpp"
#include "tensor/tensor.hpp"
#include "tests/cuda/harness.hpp"

namespace zt::test {

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

int current_device() {
  int d = 0;
  cuda::check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

// The allocator of the current device, its cache emptied.
Allocator& fresh_allocator() {
  const int d = current_device();
  Allocator& a = cuda_allocator(d);
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cuda_empty_cache(d);
  return a;
}

BlockPoolStats stats() { return cuda_allocator_stats(current_device()); }

char* at(void* p) { return static_cast<char*>(p); }

class Stream {
 public:
  Stream() { cuda::check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// Holds a stream back: a host function queued on it spins until open(), so whatever is queued
// after it stays pending. A watchdog opens it after 30 s so that a failing test cannot hang.
class Gate {
 public:
  explicit Gate(cudaStream_t s) : s_(s) {
    cuda::check(cudaLaunchHostFunc(s, &Gate::hold, this), "cudaLaunchHostFunc");
    watchdog_ = std::thread([this] {
      for (int i = 0; i < 30000 && !open_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      open_ = true;
    });
  }
  ~Gate() {
    open();
    cudaStreamSynchronize(s_);
    watchdog_.join();
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void open() { open_ = true; }

 private:
  static void CUDART_CB hold(void* self) {
    while (!static_cast<Gate*>(self)->open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  cudaStream_t s_;
  std::atomic<bool> open_{false};
  std::thread watchdog_;
};

}  // namespace

TEST_CASE("cuda allocator: the second pass of the same step makes no cudaMalloc") {
  Allocator& a = fresh_allocator();
  const std::vector<int64_t> sizes = {1, 1000, 768 * 3 * 1024, 50304 * 768, 4096, 3 * 768, 1 << 20, 17, 64 * 1024 * 1024};
  auto pass = [&] {
    std::vector<Tensor> held;
    for (size_t i = 0; i < sizes.size(); ++i) {
      held.push_back(Tensor::empty({sizes[i]}, DType::f32, MemCategory::activations, a));
      if (i % 3 == 2) held[i - 1] = Tensor();  // an activation dropped mid-step
    }
  };
  pass();
  const BlockPoolStats first = stats();
  CHECK(first.mallocs > 0);
  pass();
  const BlockPoolStats second = stats();
  CHECK(second.mallocs == first.mallocs);
  CHECK(second.cache_hits - first.cache_hits == sizes.size());
  CHECK(second.reserved == first.reserved);
  CHECK(second.in_use == 0);
}

TEST_CASE("cuda allocator: blocks split inside a segment and merge back") {
  Allocator& a = fresh_allocator();
  const BlockPoolStats s0 = stats();
  void* x = a.allocate(512 * KiB, MemCategory::other);
  void* y = a.allocate(512 * KiB, MemCategory::other);
  void* z = a.allocate(1 * MiB, MemCategory::other);
  CHECK(at(y) == at(x) + 512 * KiB);
  CHECK(at(z) == at(y) + 512 * KiB);
  CHECK(stats().mallocs == s0.mallocs + 1);
  CHECK(stats().reserved == s0.reserved + 2 * MiB);
  // The memory is real: write all of it.
  cuda::check(cudaMemset(x, 1, 2 * MiB), "cudaMemset");
  a.deallocate(y, 512 * KiB, MemCategory::other);
  void* w = a.allocate(100 * KiB, MemCategory::other);  // best fit: y's hole
  CHECK(w == y);
  a.deallocate(w, 100 * KiB, MemCategory::other);
  a.deallocate(x, 512 * KiB, MemCategory::other);
  a.deallocate(z, 1 * MiB, MemCategory::other);
  CHECK(stats().free_blocks == s0.free_blocks + 1);  // the segment whole again
  void* whole = a.allocate(2 * MiB, MemCategory::other);
  CHECK(whole == x);
  CHECK(stats().mallocs == s0.mallocs + 1);
  a.deallocate(whole, 2 * MiB, MemCategory::other);
}

TEST_CASE("cuda allocator: each category is charged what its callers hold") {
  Allocator& a = fresh_allocator();
  const MemSnapshot before = a.accounting().snapshot();
  {
    const Tensor p = Tensor::empty({1000}, DType::f32, MemCategory::parameters, a);
    const Tensor g = Tensor::empty({999}, DType::bf16, MemCategory::gradients, a);
    const Tensor o = Tensor::empty({3, 1 << 20}, DType::f32, MemCategory::optimizer, a);
    const MemSnapshot during = a.accounting().snapshot();
    CHECK(during[MemCategory::parameters] - before[MemCategory::parameters] == 4000);
    CHECK(during[MemCategory::gradients] - before[MemCategory::gradients] == 1998);
    CHECK(during[MemCategory::optimizer] - before[MemCategory::optimizer] == 12 * MiB);
    CHECK(stats().in_use == 4096 + 2048 + 12 * MiB);  // what the blocks hold, in 512 B granules
  }
  const MemSnapshot after = a.accounting().snapshot();
  for (MemCategory c : {MemCategory::parameters, MemCategory::gradients, MemCategory::optimizer})
    CHECK(after[c] == before[c]);
  CHECK(stats().in_use == 0);
}

TEST_CASE("cuda allocator: another stream reuses a freed block only after the work queued before the free") {
  Allocator& a = fresh_allocator();
  Stream s1, s2;
  const BlockPoolStats s0 = stats();
  void* p = nullptr;
  {
    CudaStreamScope on(s1.get());
    CHECK(current_cuda_stream() == s1.get());
    p = a.allocate(2 * MiB, MemCategory::activations);  // a whole segment
  }
  CHECK(current_cuda_stream() == nullptr);
  Gate gate(s1.get());
  cuda::check(cudaMemsetAsync(p, 0, 2 * MiB, s1.get()), "cudaMemsetAsync");  // pending behind the gate
  a.deallocate(p, 2 * MiB, MemCategory::activations);
  {
    CudaStreamScope on(s1.get());
    void* again = a.allocate(2 * MiB, MemCategory::activations);
    CHECK(again == p);  // its own stream: at once, queued behind the memset
    a.deallocate(again, 2 * MiB, MemCategory::activations);
  }
  void* q = nullptr;
  {
    CudaStreamScope on(s2.get());
    q = a.allocate(2 * MiB, MemCategory::activations);
    CHECK(q != p);  // s1's memset has not run
    CHECK(stats().mallocs == s0.mallocs + 2);
  }
  gate.open();
  cuda::check(cudaStreamSynchronize(s1.get()), "cudaStreamSynchronize");
  {
    CudaStreamScope on(s2.get());
    void* r = a.allocate(2 * MiB, MemCategory::activations);
    CHECK(r == p);  // now it may
    CHECK(stats().mallocs == s0.mallocs + 2);
    a.deallocate(r, 2 * MiB, MemCategory::activations);
    a.deallocate(q, 2 * MiB, MemCategory::activations);
  }
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

TEST_CASE("cuda allocator: empty_cache returns the segments nobody holds") {
  Allocator& a = fresh_allocator();
  const BlockPoolStats s0 = stats();
  void* held = a.allocate(3 * MiB, MemCategory::other);  // a 4 MiB segment, 1 MiB of it free
  void* cached = a.allocate(8 * MiB, MemCategory::other);
  a.deallocate(cached, 8 * MiB, MemCategory::other);
  CHECK(stats().reserved == s0.reserved + 12 * MiB);
  CHECK(cuda_empty_cache(current_device()) == 8 * MiB);
  const BlockPoolStats s1 = stats();
  CHECK(s1.reserved == s0.reserved + 4 * MiB);
  CHECK(s1.frees == s0.frees + 1);
  a.deallocate(held, 3 * MiB, MemCategory::other);
  CHECK(cuda_empty_cache(current_device()) == 4 * MiB);
  CHECK(stats().reserved == s0.reserved);
}

TEST_CASE("cuda allocator: more than the device has is a clear error, and the allocator goes on") {
  Allocator& a = fresh_allocator();
  size_t free_bytes = 0, total = 0;
  cuda::check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  CHECK_THROWS_WITH_AS(a.allocate(2 * total, MemCategory::activations),
                       doctest::Contains("bytes (activations) failed: out of memory"), std::runtime_error);
  CHECK(cudaGetLastError() == cudaSuccess);  // not left behind for the next check
  void* p = a.allocate(4 * KiB, MemCategory::activations);
  CHECK(p != nullptr);
  cuda::check(cudaMemset(p, 0, 4 * KiB), "cudaMemset");
  a.deallocate(p, 4 * KiB, MemCategory::activations);
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace zt::test
