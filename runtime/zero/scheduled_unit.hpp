// What the ZeRO scheduler drives: one unit's parameter gathers and gradient reductions, and the
// state they leave: ShardedUnit, alone or with its adapter units (UnitGroup). `ztrain estimate`
// drives the same ShardedUnits on the meta device (runtime/plan/ghost_step.hpp), so the estimate
// follows the scheduler's own decisions rather than a copy of its rules.
#pragma once

#include <cstdint>
#include <string>

namespace zt {

// sharded: the full parameters are not here (stage 3) or stale (after an update, stages 1-3);
// gathering: an all-gather into them is in flight; gathered: they are valid.
enum class ParamState { sharded, gathering, gathered };

class ScheduledUnit {
 public:
  virtual ~ScheduledUnit() = default;

  virtual const std::string& name() const = 0;
  virtual int64_t numel() const = 0;
  // Whether the full parameters stay between uses (every unit below stage 3).
  virtual bool persistent() const = 0;
  virtual ParamState state() const = 0;

  // sharded -> gathering; gather_done/wait_gather: gathering -> gathered; release: gathered ->
  // sharded, freeing the full parameters unless the unit is persistent.
  virtual void start_gather() = 0;
  virtual bool gather_done() = 0;
  virtual void wait_gather() = 0;
  virtual void release() = 0;
  // Parameter offload ([Note: parameter offload]): starts bringing back the shard a later gather
  // will read. Nothing for a unit whose shard stays.
  virtual void prefetch_shard() {}

  // Makes the full gradients present (stages 2-3 bring them back zeroed for each backward).
  virtual void prepare_grads() = 0;
  // Averages the full gradients over the ranks: all-reduce at stage 0, else reduce-scatter into
  // this rank's slice (or, with scatter false, all-reduce and keep the slice). Stages 2-3 then add
  // the slice into the gradient shard and free the full gradients.
  virtual void start_reduce(bool scatter) = 0;
  virtual bool reduce_done() = 0;
  virtual void wait_reduce() = 0;
  virtual bool reducing() const = 0;
};

}  // namespace zt
