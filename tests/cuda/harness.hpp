// What the CUDA kernel tests share: device buffers filled from host vectors (rounded to the
// storage type), outputs poisoned with 0xFF bytes (NaN in f32 and bf16) before every run so that
// an unwritten element fails, fresh random inputs per run (the seed is printed on failure), and
// the comparison: ||got - ref|| / ||ref|| under a bound per dtype, with any NaN or inf failing.
#pragma once

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/kernels.hpp"

namespace zt::test {

using cuda::bf16;

// Relative error bounds: f32 results agree with the CPU twin to ~1e-5; bf16 holds 8 bits of
// mantissa, so ~1e-2.
template <class T> constexpr double kTol = std::is_same_v<T, float> ? 1e-5 : 1e-2;

inline float round_to(float x, float) { return x; }
inline float round_to(float x, bf16) { return bf16_to_f32(f32_to_bf16(x)); }

// Rounds every value to what storage type T holds, so the CPU twin sees the GPU's inputs.
template <class T> std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_to(x, T{});
  return v;
}

inline std::mt19937_64& rng() {
  static std::mt19937_64 g = [] {
    const uint64_t seed = std::random_device{}();
    std::printf("random seed %llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return g;
}

inline std::vector<float> random_vec(size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng());
  return v;
}

inline std::vector<int32_t> random_ints(size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = d(rng());
  return v;
}

// Device memory for n elements of T, freed on destruction.
template <class T> class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { cuda::check(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc"); }
  // From host values (rounded to T).
  template <class U> explicit DeviceBuffer(const std::vector<U>& v) : DeviceBuffer(v.size()) { upload(v); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  operator T*() const { return p_; }
  size_t size() const { return n_; }

  template <class U> void upload(const std::vector<U>& v) {
    REQUIRE(v.size() == n_);
    std::vector<T> h(n_);
    for (size_t i = 0; i < n_; ++i) {
      if constexpr (std::is_same_v<T, bf16>) h[i] = __float2bfloat16_rn(static_cast<float>(v[i]));
      else h[i] = static_cast<T>(v[i]);
    }
    cuda::check(cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  // Waits for the device, then copies back, converted to float (or the integer type).
  auto download() const {
    cuda::check(cudaDeviceSynchronize(), "kernel");
    std::vector<T> h(n_);
    cuda::check(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, float>) {
      std::vector<float> f(n_);
      for (size_t i = 0; i < n_; ++i) f[i] = static_cast<float>(h[i]);
      return f;
    } else {
      return h;
    }
  }
  void poison() { cuda::check(cudaMemset(p_, 0xFF, n_ * sizeof(T)), "cudaMemset"); }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// ||got - ref|| / ||ref|| (ref all zero: ||got||), and whether every element is finite.
struct Compared {
  double rel = 0;
  bool finite = true;
  size_t first_bad = SIZE_MAX;
};

inline Compared compare(const std::vector<float>& got, const std::vector<float>& ref) {
  Compared c;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      c.finite = false;
      if (c.first_bad == SIZE_MAX) c.first_bad = i;
      continue;
    }
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  c.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return c;
}

// CHECKs that got matches ref within tol, naming `what` and the first non-finite element.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double tol,
                         const std::string& what) {
  REQUIRE(got.size() == ref.size());
  const Compared c = compare(got, ref);
  INFO(what << ": relative error " << c.rel << " (bound " << tol << ")"
            << (c.finite ? std::string() : ", element " + std::to_string(c.first_bad) + " not finite"));
  CHECK(c.finite);
  CHECK(c.rel <= tol);
}

}  // namespace zt::test
