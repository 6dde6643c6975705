#include "runtime/zero/shard.hpp"

#include <algorithm>
#include <stdexcept>

namespace zt {

ShardGeometry shard_geometry(int64_t numel, int world, int rank) {
  if (numel < 0 || world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("shard_geometry: bad arguments");
  const int64_t unit = world * kShardAlignment;
  return {numel, (numel + unit - 1) / unit * kShardAlignment, world, rank};
}

Ranges clip_ranges(const Ranges& ranges, int64_t begin, int64_t length) {
  Ranges out;
  for (auto [b, e] : ranges) {
    const int64_t lo = std::max(b, begin), hi = std::min(e, begin + length);
    if (lo < hi) out.emplace_back(lo - begin, hi - begin);
  }
  return out;
}

}  // namespace zt
