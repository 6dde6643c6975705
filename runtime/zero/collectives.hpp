// The collectives of a ZeRO unit, as free functions over flat buffers (FSDP2's
// _fsdp_collectives): what moves between ranks, and the casts and sums around it. They take the
// shard group's communicator: the ranks one unit is sharded over (today every rank; hybrid
// sharding will add a replicate group, over which the reduced gradients are then all-reduced).
// ShardedUnit decides which buffers they take ([Note: ZeRO buffers]) and when (the scheduler).
#pragma once

#include "comm/communicator.hpp"
#include "kernels/backend.hpp"
#include "runtime/zero/shard.hpp"
#include "tensor/tensor.hpp"

namespace zt {

// Every rank's `shard` into `full` (the shards in rank order; in place where `shard` is this
// rank's slice of `full`).
WorkPtr all_gather_params(Communicator& shard_group, const Tensor& shard, const Tensor& full);

// Averages gradients `buf` (the unit's padded full gradients, or their 16-bit copy) over the
// shard group: all of them (all-reduce), or into this rank's slice of them (reduce-scatter).
WorkPtr reduce_grads(Communicator& shard_group, const Tensor& buf, const ShardGeometry& geo, bool all_reduce);

// After a reduction at stages 2-3: the averaged slice of this micro-batch added into the f32
// gradient shard (16-bit slices widened first), on `memory`'s device.
void accumulate_into_shard(const Tensor& grad_shard, const Tensor& slice, Allocator& memory);

// `to` = `from` converted between f32, bf16 and f16, on `from`'s device; across devices the
// converted values are then copied.
void cast_into(const Tensor& from, const Tensor& to);
// Rounds f32 `x` to `wire` and back, in place; returns the 16-bit copy (in `memory`, category `c`).
Tensor round_through(const Tensor& x, DType wire, MemCategory c, Allocator& memory);

}  // namespace zt
