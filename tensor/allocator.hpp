// Allocators with per-category accounting. Every byte a tensor holds is charged to one category,
// so the trainer and the benchmarks can report (and `ztrain estimate` can be checked against)
// what parameters, gradients, optimizer states and activations really cost.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace zt {

// meta: storage with sizes and accounting but no data, for planning ([Note: the meta device] in
// tensor/meta_allocator.hpp).
enum class Device : uint8_t { cpu, cuda, meta };
std::string_view device_name(Device d);

enum class MemCategory : uint8_t { parameters, gradients, optimizer, activations, communication, other };
constexpr size_t kMemCategories = 6;
std::string_view category_name(MemCategory c);

struct MemSnapshot {
  std::array<size_t, kMemCategories> current{};
  std::array<size_t, kMemCategories> peak{};
  size_t total_current = 0;
  size_t total_peak = 0;  // peak of the sum, not the sum of peaks
  // What the allocator held from the system at its peak: the bytes in use and the freed blocks
  // its cache keeps for reuse ([Note: host block cache]); PyTorch's max_memory_reserved.
  size_t reserved_peak = 0;
  size_t operator[](MemCategory c) const { return current[static_cast<size_t>(c)]; }
  size_t peak_of(MemCategory c) const { return peak[static_cast<size_t>(c)]; }
};

// Thread-safe byte counters; one per allocator (i.e. per device).
class MemAccounting {
 public:
  void add(MemCategory c, size_t bytes);
  void sub(MemCategory c, size_t bytes);
  // The bytes the allocator keeps for reuse, not in use: they count toward reserved_peak.
  void set_cached(size_t bytes);
  MemSnapshot snapshot() const;
  // Peaks restart from the current values (e.g. at the start of a measured step).
  void reset_peaks();

 private:
  std::array<std::atomic<size_t>, kMemCategories> current_{};
  std::array<std::atomic<size_t>, kMemCategories> peak_{};
  std::atomic<size_t> total_{0};
  std::atomic<size_t> total_peak_{0};
  std::atomic<size_t> cached_{0};
  std::atomic<size_t> reserved_peak_{0};
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // Returns memory for `bytes` (never null for bytes > 0; throws std::bad_alloc naming the size).
  virtual void* allocate(size_t bytes, MemCategory c) = 0;
  virtual void deallocate(void* p, size_t bytes, MemCategory c) = 0;
  // Sets `bytes` at p (this allocator's memory) to zero; on a device, ordered on the calling
  // thread's stream (CudaStreamScope) like the kernels that follow.
  virtual void zero(void* p, size_t bytes);
  // Copies `bytes` from src to dst where either side is this allocator's memory and the other
  // host memory (or this allocator's too); returns once dst holds the bytes, or with `wait`
  // false possibly before (a device's copy then runs in order on the calling thread's stream, and
  // src must stay untouched until work ordered after it has run). Tensor::copy_from picks the
  // device side's allocator.
  virtual void copy(void* dst, const void* src, size_t bytes, bool wait = true);
  // Host memory for staging this allocator's data on the host: page-locked and registered with a
  // device (so its copies run at full speed), or for host memory the host allocator itself.
  virtual Allocator& pinned_host();
  // Hands the blocks this allocator keeps for reuse back to the system (or the device's driver);
  // returns their bytes. A library's host calls this (through zt_trainer_destroy) to get back what
  // a trainer took.
  virtual size_t empty_cache() { return 0; }
  // The freed blocks this allocator keeps, as (block bytes, blocks) by size; empty where it keeps
  // none (bench/host_cache measures the host's: [Note: host block cache]).
  virtual std::vector<std::pair<size_t, size_t>> cached_blocks() const { return {}; }
  MemAccounting& accounting() { return accounting_; }

 protected:
  MemAccounting accounting_;
};

// Empties `device`'s cache and the host's (cpu_allocator), where a trainer's blocks go back to the
// system once it is gone; returns the bytes released.
size_t empty_caches(Allocator& device);

// Host memory, 64-byte aligned; from 4096 bytes up page aligned with room to the next whole page,
// so such buffers suit O_DIRECT I/O ([Note: host alignment] in tensor/allocator.cpp).
Allocator& cpu_allocator();

}  // namespace zt
