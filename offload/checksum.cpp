#include "offload/checksum.hpp"

#include <cstring>

namespace zt {

namespace {
constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull, kMul2 = 0xC2B2AE3D27D4EB4Full;
inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
}  // namespace

void Checksum::block(const unsigned char* b) {
  for (int k = 0; k < 4; ++k) {
    uint64_t w;
    std::memcpy(&w, b + 8 * k, 8);
    lane_[k] = rotl(lane_[k] + w * kMul2, 31) * kMul;
  }
}

void Checksum::update(const void* p, size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  length_ += bytes;
  if (tail_bytes_) {  // complete the carried block first
    const size_t take = bytes < 32 - tail_bytes_ ? bytes : 32 - tail_bytes_;
    std::memcpy(tail_ + tail_bytes_, b, take);
    tail_bytes_ += take;
    b += take;
    bytes -= take;
    if (tail_bytes_ < 32) return;
    block(tail_);
    tail_bytes_ = 0;
  }
  for (; bytes >= 32; b += 32, bytes -= 32) block(b);
  std::memcpy(tail_, b, bytes);
  tail_bytes_ = bytes;
}

uint64_t Checksum::value() const {
  uint64_t h = length_ * kMul;
  for (int k = 0; k < 4; ++k) h = rotl(h ^ lane_[k], 27) * kMul + kMul2;
  for (size_t i = 0; i < tail_bytes_; ++i) h = rotl(h ^ tail_[i], 11) * kMul;
  return h ^ (h >> 29);
}

}  // namespace zt
