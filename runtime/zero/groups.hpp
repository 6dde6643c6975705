// ShardGroups: the communicators a ZeRO run's units move over ([Note: shard groups]).
//
// [Note: shard groups] Which ranks a unit's shards span, and which ranks hold the same shard:
//   plain (stages 0-3): one group of every rank; each unit is sharded over all of them.
//   hybrid (FSDP's HYBRID_SHARD at stage 3 and _HYBRID_SHARD_ZERO2 at stage 2, DeepSpeed's MiCS):
//     the world cut into groups of G consecutive ranks (zero_optimization.shard_group_size;
//     by default the ranks per host, so that the groups are the hosts under mpirun's by-slot
//     placement). Each group shards every unit over its G ranks as a plain run over G would, and
//     the ranks at the same place in every group hold the same shard: they are its replicas.
//     Gathers stay within the group; a gradient is reduce-scattered (averaged) within the group
//     and its slice then all-reduced (averaged) over the replicas, so that every replica updates
//     the same shard from the average over every rank. Across groups only the slices travel,
//     once a step.
//   hpZ (ZeRO++'s zero_hpz_partition_size H, stage 3): units sharded over every rank as plain;
//     the gather of a stage-3 unit over every rank leaves each rank its slice of the gathered
//     16-bit parameters within its group of H consecutive ranks (the secondary shard, kept with
//     the unit), and until the parameters change (an update, a load), the unit's next gathers
//     (the backward's, a recompute's) take those, within the group. Gradients reduce over every
//     rank, as plain.
// A run's traffic is intra-group (over a communicator whose ranks are all in one group: the
// hybrid shard group, hpZ's group) or inter-group (over one spanning several: the replicas, the
// world). Without hybrid or hpZ the groups are the hosts: on one host everything is intra-group.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "runtime/config.hpp"

namespace zt {

// The shard group's size for `z` on a world of `world` ranks, `ranks_per_host` of them on this
// host: shard_group_size, else the ranks per host (hybrid), or zero_hpz_partition_size (hpZ); the
// world for a plain run. ConfigError naming the key unless it divides the world size.
int shard_group_ranks(const ZeroConfig& z, int world, int ranks_per_host);
// Whether traffic over the world is inter-group for `z` on `world` ranks, `ranks_per_host` on this
// host, cut into groups of `group` (shard_group_ranks).
bool world_is_inter_group(const ZeroConfig& z, int world, int ranks_per_host, int group);

// Second parts of two-part collectives (a gradient slice's all-reduce over the replicas once its
// reduction within the group completed), started in the order their first parts were issued:
// the same on every rank, whichever first part completes first, as a communicator's operations
// must be.
class FollowUps {
 public:
  struct Item {
    WorkPtr first;
    std::function<WorkPtr()> then;
    WorkPtr second;  // set once started
  };
  std::shared_ptr<Item> add(WorkPtr first, std::function<WorkPtr()> then);
  // Starts the second parts whose first parts completed, from the oldest on; with `until`, waits
  // for first parts (in order) until `until`'s second part has started.
  void advance(const Item* until = nullptr);

 private:
  std::deque<std::shared_ptr<Item>> queue_;
};

class ShardGroups {
 public:
  // Collective over `world` (it splits it). `world` outlives this; the config was checked
  // (shard_group_ranks) on every rank alike.
  ShardGroups(Communicator& world, const ZeroConfig& z);
  // Over groups made elsewhere (a ghost step's, [Note: the ghost communicator] in
  // runtime/plan/ghost_comm.hpp, where one rank stands for all and no split can be agreed):
  // `shard` and `replicas` (hybrid) or `secondary` (hpZ) as the splits above would make them, null
  // where there are none.
  ShardGroups(Communicator& world, std::unique_ptr<Communicator> shard, std::unique_ptr<Communicator> replicas,
              std::unique_ptr<Communicator> secondary, bool world_spans);
  ShardGroups(const ShardGroups&) = delete;
  ShardGroups& operator=(const ShardGroups&) = delete;

  Communicator& world() const { return world_; }
  // The ranks a unit's shards span: the hybrid group, else the world.
  Communicator& shard() const { return shard_ ? *shard_ : world_; }
  // Hybrid: the ranks holding this rank's shard (null: no replicas, one group).
  Communicator* replicas() const { return replicas_.get(); }
  // hpZ: the ranks a secondary shard spans (null: no hpZ).
  Communicator* secondary() const { return secondary_.get(); }
  // Whether this rank writes its shard into a checkpoint: one replica of each (the first group).
  bool writes_shard() const { return !replicas_ || replicas_->rank() == 0; }

  // Averages `slice` (this rank's gradient slice, already averaged within the shard group by
  // `first`) over the replicas once `first` completes; the Work completes when both have. Without
  // replicas `first` itself.
  WorkPtr then_over_replicas(WorkPtr first, const Tensor& slice);

  // [Note: bytes sent] over this run's communicators since they were made, by kind of group.
  uint64_t intra_bytes() const;
  uint64_t inter_bytes() const;
  // Whether traffic over the world is inter-group (it spans several groups).
  bool world_spans_groups() const { return world_spans_; }

  // "hybrid sharding: 2 groups of 2 ranks (sharded within, replicated across)"; "" for a run without
  // hybrid sharding or hpZ.
  std::string describe() const;

 private:
  Communicator& world_;
  std::unique_ptr<Communicator> shard_, replicas_, secondary_;
  bool world_spans_ = false;
  FollowUps follow_ups_;
};

}  // namespace zt
