// Where this rank's slice of a unit's flat buffer lies. [Note: flat shards]
//
// [Note: flat shards] A unit's parameters are one flat buffer padded to a multiple of
// world_size x kShardAlignment elements, so every rank owns one contiguous slice [r*S, (r+1)*S) of
// the same length S and collectives need no per-rank counts. The padding holds zeros: its
// gradients are zero, AdamW leaves it zero, and it adds nothing to the gradient norm. Gradients,
// master weights and Adam's m and v mirror the layout.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace zt {

// Elements; 32 f32 is two cache lines and keeps 16-bit shards 64-byte aligned too.
inline constexpr int64_t kShardAlignment = 32;

struct ShardGeometry {
  int64_t numel = 0;  // the unit's parameters
  int64_t shard = 0;  // S: elements each rank owns, padding included
  int world = 1, rank = 0;
  int64_t padded() const { return shard * world; }
  int64_t begin() const { return shard * rank; }
};

ShardGeometry shard_geometry(int64_t numel, int world, int rank);

using Ranges = std::vector<std::pair<int64_t, int64_t>>;  // sorted [begin, end) element ranges

// The parts of `ranges` inside [begin, begin + length), shifted so that `begin` becomes 0.
Ranges clip_ranges(const Ranges& ranges, int64_t begin, int64_t length);

}  // namespace zt
