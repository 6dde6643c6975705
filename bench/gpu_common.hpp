// Shared by the GPU benchmark programs (bench/gpu_kernels.cpp, bench/gpu_step.cpp): the device
// check (exit 77 without one, like the GPU tests), random device buffers, timing with CUDA
// events, and the two ceilings METHOD.md measures everything against.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "kernels/cuda/kernels.hpp"

namespace zt::bench {

using cuda::bf16;
using cuda::check;

// Exits 77 (skipped) where no CUDA device is usable, and selects device 0.
inline void require_device(const char* program) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "%s: no CUDA device; skipped\n", program);
    std::exit(77);
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  std::printf("# device 0: %s, %d SMs, L2 %d MiB, %.0f GiB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20,
              static_cast<double>(p.totalGlobalMem) / (1 << 30));
}

// Device memory that lives as long as the program (a benchmark frees nothing early).
template <class T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(p);
}

// Random values, never zero (zeros hide unwritten outputs and run faster): uniform magnitude in
// [lo, hi), random sign unless positive. Filled from a host pool copied at rotating offsets, so
// gigabytes of buffers cost no host time per element.
template <class T>
void fill_random(T* d, size_t n, float lo = 0.1f, float hi = 1.0f, bool positive = false) {
  constexpr size_t kPool = size_t{1} << 22;
  static std::mt19937 rng(1234);
  std::uniform_real_distribution<float> mag(lo, hi);
  std::vector<T> pool(kPool);
  for (auto& x : pool) {
    float v = mag(rng);
    if (!positive && (rng() & 1)) v = -v;
    x = static_cast<T>(v);
  }
  for (size_t i = 0; i < n;) {
    const size_t off = rng() % (kPool / 2), k = std::min(n - i, kPool - off);
    check(cudaMemcpy(d + i, pool.data() + off, k * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    i += k;
  }
}

// Random tokens in [0, V) (the same ones every call); returns the host copy.
inline std::vector<int32_t> fill_tokens(int32_t* d, size_t n, int V) {
  std::mt19937 rng(42);
  std::vector<int32_t> h(n);
  for (auto& t : h) t = static_cast<int32_t>(rng() % static_cast<unsigned>(V));
  check(cudaMemcpy(d, h.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice), "cudaMemcpy");
  return h;
}

// Median time in microseconds of `reps` runs of f(rep) on stream s, each between two events,
// after `warmup` untimed runs. f gets the repetition number to rotate its buffers by.
inline double time_us(cudaStream_t s, const std::function<void(int)>& f, int reps = 25, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) f(i);
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(reps));
  for (auto& e : ev) check(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(ev[2 * i], s), "cudaEventRecord");
    f(i);
    check(cudaEventRecord(ev[2 * i + 1], s), "cudaEventRecord");
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::vector<double> us(reps);
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
    us[i] = 1e3 * ms;
  }
  for (auto& e : ev) check(cudaEventDestroy(e), "cudaEventDestroy");
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// The copy ceiling: a 1 GiB device-to-device copy, bytes read plus written per second (GB/s).
inline double copy_ceiling_gbs(cudaStream_t s) {
  const size_t bytes = size_t{1} << 30;
  char* a = device_alloc<char>(bytes);
  char* b = device_alloc<char>(bytes);
  check(cudaMemsetAsync(a, 0x5a, bytes, s), "cudaMemsetAsync");
  const double us = time_us(s, [&](int) { check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s), "copy"); });
  check(cudaFree(a), "cudaFree");
  check(cudaFree(b), "cudaFree");
  return 2.0 * static_cast<double>(bytes) / us * 1e-3;
}

// The GEMM ceiling: cuBLASLt bf16 8192^3 through matmul_forward on random data (TFLOP/s).
inline double gemm_ceiling_tflops(cudaStream_t s) {
  const int n = 8192;
  const size_t nn = static_cast<size_t>(n) * n;
  bf16* a = device_alloc<bf16>(nn);
  bf16* w = device_alloc<bf16>(nn);
  bf16* d = device_alloc<bf16>(nn);
  fill_random(a, nn);
  fill_random(w, nn);
  const double us = time_us(s, [&](int) { cuda::matmul_forward<bf16>(d, a, w, nullptr, n, n, n, s); });
  check(cudaFree(a), "cudaFree");
  check(cudaFree(w), "cudaFree");
  check(cudaFree(d), "cudaFree");
  return 2.0 * static_cast<double>(nn) * n / us * 1e-6;
}

}  // namespace zt::bench
