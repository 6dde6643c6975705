// A fast 64-bit checksum for data written to disk and read back (swap records, checkpoint
// regions): four multiply-rotate lanes over 8-byte words, so it runs near memory bandwidth. Not
// cryptographic: it catches files changed or truncated by accident.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zt {

// Fed in pieces of any size; the value depends only on the bytes and their order.
class Checksum {
 public:
  void update(const void* p, size_t bytes);
  uint64_t value() const;

 private:
  void block(const unsigned char* b);  // 32 bytes
  uint64_t lane_[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, ~0x9E3779B97F4A7C15ull, ~0xC2B2AE3D27D4EB4Full};
  unsigned char tail_[32];
  size_t tail_bytes_ = 0;
  uint64_t length_ = 0;
};

inline uint64_t checksum(const void* p, size_t bytes) {
  Checksum c;
  c.update(p, bytes);
  return c.value();
}

}  // namespace zt
