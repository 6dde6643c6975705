// Freed host blocks kept for the next allocation of the same size. [Note: host block cache]
//
// [Note: host block cache] A training step allocates the same sizes every step (activations,
// their gradients, communication buffers). Handed back to the C library, blocks above glibc's
// mmap threshold (128 KiB, raised at run time to the largest such block freed so far, up to
// 32 MiB) return to the system and come back as fresh pages, zero-filled on first touch: page
// faults in every step, and as many as the order of the first frees decides (bench/RESULTS.md,
// issue 17's reshape: 0.95-1.26 M minor faults over four GPT-2 124M steps, 7-15% of the step,
// moving with every change to the code). So the host allocator keeps freed blocks of at least
// kMinBytes by their exact (page-rounded) size and hands them out again. It keeps at most as many
// bytes as were ever handed out at once, so a run's host memory stays under twice its peak; an
// allocation the system refuses first returns every kept block and tries again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace zt {

class HostBlockCache {
 public:
  static constexpr size_t kMinBytes = size_t{128} << 10;  // below, malloc's heap recycles blocks itself

  HostBlockCache() = default;
  ~HostBlockCache();  // frees the kept blocks
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  // A block of `bytes` (page aligned; `bytes` a multiple of 4096 from kMinBytes up): a kept one, or
  // a new one from the system; nullptr when the system has no room even after the kept blocks went.
  void* allocate(size_t bytes);
  // Takes back a block allocate() returned: kept, or freed when keeping it would pass the limit.
  void free(void* p, size_t bytes);
  // Frees every kept block; returns their bytes.
  size_t release();
  size_t kept() const;  // bytes kept now
  // The kept blocks as (block bytes, blocks), smallest first.
  std::vector<std::pair<size_t, size_t>> kept_by_size() const;

  struct Stats {
    uint64_t hits = 0, misses = 0;  // allocations served from kept blocks, and from the system
    size_t kept = 0;                // bytes kept now
    size_t in_use = 0, peak_in_use = 0;
  };
  Stats stats() const;

 private:
  size_t release_locked();

  mutable std::mutex m_;
  std::unordered_map<size_t, std::vector<void*>> kept_;  // by size
  Stats stats_;
};

}  // namespace zt
