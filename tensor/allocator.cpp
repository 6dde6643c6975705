#include "tensor/allocator.hpp"

#include "tensor/host_cache.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace zt {

std::string_view device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
    case Device::meta: return "meta";
  }
  return "unknown";
}

std::string_view category_name(MemCategory c) {
  static constexpr std::string_view names[kMemCategories] = {
      "parameters", "gradients", "optimizer", "activations", "communication", "other"};
  return names[static_cast<size_t>(c)];
}

namespace {
void raise_to(std::atomic<size_t>& peak, size_t value) {
  size_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}
}  // namespace

void MemAccounting::add(MemCategory c, size_t bytes) {
  const size_t i = static_cast<size_t>(c);
  raise_to(peak_[i], current_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  const size_t total = total_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  raise_to(total_peak_, total);
  raise_to(reserved_peak_, total + cached_.load(std::memory_order_relaxed));
}

void MemAccounting::set_cached(size_t bytes) {
  cached_.store(bytes, std::memory_order_relaxed);
  raise_to(reserved_peak_, total_.load(std::memory_order_relaxed) + bytes);
}

void MemAccounting::sub(MemCategory c, size_t bytes) {
  current_[static_cast<size_t>(c)].fetch_sub(bytes, std::memory_order_relaxed);
  total_.fetch_sub(bytes, std::memory_order_relaxed);
}

MemSnapshot MemAccounting::snapshot() const {
  MemSnapshot s;
  for (size_t i = 0; i < kMemCategories; ++i) {
    s.current[i] = current_[i].load(std::memory_order_relaxed);
    s.peak[i] = peak_[i].load(std::memory_order_relaxed);
  }
  s.total_current = total_.load(std::memory_order_relaxed);
  s.total_peak = total_peak_.load(std::memory_order_relaxed);
  s.reserved_peak = reserved_peak_.load(std::memory_order_relaxed);
  return s;
}

void MemAccounting::reset_peaks() {
  for (size_t i = 0; i < kMemCategories; ++i) peak_[i].store(current_[i].load());
  total_peak_.store(total_.load());
  reserved_peak_.store(total_.load() + cached_.load());
}

void Allocator::zero(void* p, size_t bytes) {
  if (bytes) std::memset(p, 0, bytes);
}

void Allocator::copy(void* dst, const void* src, size_t bytes, bool) {
  if (bytes) std::memcpy(dst, src, bytes);
}

Allocator& Allocator::pinned_host() { return cpu_allocator(); }

namespace {
// [Note: host alignment] From a page up, page aligned and rounded to whole pages, so that any such
// buffer can take O_DIRECT I/O (offload reads shards straight into their tensors).
size_t host_alignment(size_t bytes) { return bytes >= 4096 ? 4096 : 64; }
size_t host_block_bytes(size_t bytes) {
  const size_t align = host_alignment(bytes);
  return (bytes + align - 1) / align * align;
}

class CpuAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu; }
  void* allocate(size_t bytes, MemCategory c) override {
    if (bytes == 0) return nullptr;
    const size_t rounded = host_block_bytes(bytes);
    // [Note: host block cache]: large blocks come back from the cache.
    void* p = rounded >= HostBlockCache::kMinBytes ? cache_.allocate(rounded)
                                                   : std::aligned_alloc(host_alignment(bytes), rounded);
    if (!p) throw std::runtime_error("host allocation of " + std::to_string(bytes) + " bytes (" +
                                     std::string(category_name(c)) + ") failed");
    // The cache's share first, then the use: a block taken from it is never counted twice.
    accounting_.set_cached(cache_.kept());
    accounting_.add(c, bytes);
    return p;
  }
  void deallocate(void* p, size_t bytes, MemCategory c) override {
    if (!p) return;
    const size_t rounded = host_block_bytes(bytes);
    accounting_.sub(c, bytes);
    if (rounded >= HostBlockCache::kMinBytes) cache_.free(p, rounded);
    else std::free(p);
    accounting_.set_cached(cache_.kept());
  }
  size_t empty_cache() override {
    const size_t released = cache_.release();
    accounting_.set_cached(0);
    return released;
  }
  std::vector<std::pair<size_t, size_t>> cached_blocks() const override { return cache_.kept_by_size(); }

 private:
  HostBlockCache cache_;
};
}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator instance;
  return instance;
}

size_t empty_caches(Allocator& device) {
  return (&device == &cpu_allocator() ? 0 : device.empty_cache()) + cpu_allocator().empty_cache();
}

}  // namespace zt
