// The collectives of a ZeRO unit, as free functions over flat buffers (FSDP2's
// _fsdp_collectives): what moves between ranks, and the casts and sums around it. They take the
// run's ShardGroups ([Note: shard groups]): the ranks one unit is sharded over, and where there
// are replicas, the ranks the reduced gradients are then all-reduced over. ShardedUnit decides
// which buffers they take ([Note: ZeRO buffers]) and when (the scheduler).
#pragma once

#include "comm/communicator.hpp"
#include "kernels/backend.hpp"
#include "runtime/zero/groups.hpp"
#include "runtime/zero/shard.hpp"
#include "tensor/tensor.hpp"

namespace zt {

// Every rank's `shard` into `full` over `group` (the shards in rank order; in place where `shard`
// is this rank's slice of `full`): the shard group, or hpZ's for a secondary shard.
WorkPtr all_gather_params(Communicator& group, const Tensor& shard, const Tensor& full);

// Averages gradients `buf` (the unit's padded full gradients, or their 16-bit copy) over every
// rank: over the shard group all of them (all-reduce) or into this rank's slice of them
// (reduce-scatter), and then with replicas that slice over them (all of `buf` is then the group's
// average only).
WorkPtr reduce_grads(ShardGroups& groups, const Tensor& buf, const ShardGeometry& geo, bool all_reduce);

// After a reduction at stages 2-3: the averaged slice of this micro-batch added into the f32
// gradient shard (16-bit slices widened first), on `memory`'s device.
void accumulate_into_shard(const Tensor& grad_shard, const Tensor& slice, Allocator& memory);

// `to` = `from` converted between f32, bf16 and f16, on `from`'s device; across devices the
// converted values are then copied.
void cast_into(const Tensor& from, const Tensor& to);
// Rounds f32 `x` to `wire` and back, in place; returns the 16-bit copy (in `memory`, category `c`).
Tensor round_through(const Tensor& x, DType wire, MemCategory c, Allocator& memory);

}  // namespace zt
