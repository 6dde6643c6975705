// One rank's training step with no data and no other ranks: the model's own forward and backward
// on the meta device, under the real ZeroScheduler, over the engine's own ShardedUnits and
// offloads with their buffers on the meta device, so that the ledger sees what they allocate and
// free ([Note: memory estimate] in estimate.hpp); their collectives go to ghost communicators
// ([Note: the ghost communicator] in ghost_comm.hpp). Given a GhostClock the step also takes
// time: every op, flat-buffer operation and collective is priced and the scheduler's waits are
// waited on a simulated clock ([Note: step simulation] in simulate.hpp). `ztrain estimate` and
// `ztrain simulate` both run it.
#pragma once

#include <memory>
#include <string>

#include "kernels/op_cost.hpp"
#include "models/model.hpp"
#include "runtime/config.hpp"
#include "runtime/trace.hpp"
#include "tensor/allocator.hpp"

namespace zt {

// The model `cfg` trains, built for a ghost step (its dimensions from the config, or from
// model.init_from's checkpoint), after the checks a run makes of the batch over `world_size`
// ranks and of the dimensions: ConfigError naming the setting.
std::unique_ptr<Model> ghost_model(const Config& cfg, int world_size);

// Which ranks a collective runs over.
enum class GhostGroup : uint8_t { world, shard, replicas, secondary };

// The ranks a ghost step's collectives span ([Note: shard groups] in runtime/zero/groups.hpp):
// the run's, a shard group's, an hpZ group's (1: none). Consecutive ranks form a group, and
// `ranks_per_host` consecutive ranks a host.
struct GhostGroups {
  int world = 1, shard = 1, secondary = 1, ranks_per_host = 1;
  bool hybrid = false;
  int replicas() const { return world / shard; }
  // Whether `g`'s traffic counts as across groups (ShardGroups::inter_bytes): the replicas', and
  // the world's where it spans several groups (hybrid) or, in a plain run, several hosts.
  bool inter(GhostGroup g) const;
};
// `z` as a stage runs it (hybrid from stage 2, hpZ at 3). ConfigError where a group size does not
// divide the world.
GhostGroups ghost_groups(const ZeroConfig& z, int world, int ranks_per_host);

// A simulated clock for a ghost step: compute (the meta backend's ops, [Note: op costs], and the
// engine's flat-buffer work) advances it; collectives run as the clock's cluster runs them
// ([Note: step simulation] in runtime/plan/simulate.hpp), and compute waits for one where the
// scheduler waits.
class GhostClock : public OpCostSink {
 public:
  // Starts collective `kind` (all_gather, reduce_scatter or all_reduce) of `bytes` (the whole
  // buffer, as nccl-tests sizes it) over `g`, once operation `after` (an id; -1: none) has
  // completed. Returns its id.
  virtual int issue(TraceLane kind, GhostGroup g, double bytes, int after, const std::string& name) = 0;
  // Whether operation `id` has completed by now (the scheduler's test).
  virtual bool done(int id) = 0;
  // Compute waits until operation `id` has completed.
  virtual void wait(int id) = 0;
  // The engine's own work over flat buffers on the compute stream (`what`: "cast", "zero",
  // "accumulate", "norm", "adamw"), moving `bytes`.
  virtual void flat_work(const char* what, double bytes) = 0;
  // A unit's forward, backward or recompute begins (`begin`) or ends on the compute lane: `span`
  // e.g. "forward block3", as the real scheduler names them.
  virtual void unit_span(const std::string& span, bool begin) = 0;
};

class GhostStep {
 public:
  // `cfg`'s model (`model`, built by the caller) at `stage` over `world` ranks, `ranks_per_host` a
  // host; `clock` null for memory alone. ConfigError for settings the run would reject.
  GhostStep(const Config& cfg, const Model& model, int stage, int world, int ranks_per_host, GhostClock* clock = nullptr);
  ~GhostStep();
  GhostStep(const GhostStep&) = delete;
  GhostStep& operator=(const GhostStep&) = delete;

  // One step as Trainer::step runs it: the micro-batches' passes, the step's one-element
  // all-reduces, the update and the kept parameters gathered again. The first records the
  // schedule, as a real run's first step does.
  void run();
  MemAccounting& ledger();
  const GhostGroups& groups() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace zt
