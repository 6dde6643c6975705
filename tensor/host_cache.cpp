#include "tensor/host_cache.hpp"

#include <algorithm>
#include <cstdlib>

namespace zt {

HostBlockCache::~HostBlockCache() { release_locked(); }

void* HostBlockCache::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(m_);
  void* p = nullptr;
  if (auto it = kept_.find(bytes); it != kept_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    stats_.kept -= bytes;
    ++stats_.hits;
  } else {
    p = std::aligned_alloc(4096, bytes);
    if (!p && release_locked() > 0) p = std::aligned_alloc(4096, bytes);
    if (!p) return nullptr;
    ++stats_.misses;
  }
  stats_.in_use += bytes;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return p;
}

void HostBlockCache::free(void* p, size_t bytes) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(m_);
  stats_.in_use -= bytes;
  if (stats_.kept + bytes > stats_.peak_in_use) return std::free(p);
  kept_[bytes].push_back(p);
  stats_.kept += bytes;
}

size_t HostBlockCache::release() {
  std::lock_guard<std::mutex> lock(m_);
  return release_locked();
}

size_t HostBlockCache::release_locked() {
  size_t n = 0;
  for (auto& [bytes, blocks] : kept_) {
    for (void* p : blocks) std::free(p);
    n += bytes * blocks.size();
  }
  kept_.clear();
  stats_.kept = 0;
  return n;
}

size_t HostBlockCache::kept() const {
  std::lock_guard<std::mutex> lock(m_);
  return stats_.kept;
}

std::vector<std::pair<size_t, size_t>> HostBlockCache::kept_by_size() const {
  std::lock_guard<std::mutex> lock(m_);
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& [bytes, blocks] : kept_)
    if (!blocks.empty()) out.emplace_back(bytes, blocks.size());
  std::sort(out.begin(), out.end());
  return out;
}

HostBlockCache::Stats HostBlockCache::stats() const {
  std::lock_guard<std::mutex> lock(m_);
  return stats_;
}

}  // namespace zt
