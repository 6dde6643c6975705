// ZeroEngine: ZeRO stages 0-3 through one engine ([Note: ZeRO stages]). It owns every unit's
// buffers on this rank (ShardedUnit), binds the model's parameters to them, hangs the scheduler on
// the tape, and runs the step's communication-side phases: gradient averaging, the global norm,
// the update of this rank's shard, and bringing the full parameters back.
//
// [Note: ZeRO stages] 0 = DDP (every rank holds everything, gradients all-reduced), 1 = AdamW
// states and master weights sharded, 2 = + gradients, 3 = + parameters, gathered unit by unit
// while in use. FSDP's NO_SHARD, SHARD_GRAD_OP and FULL_SHARD are stages 0, 2 and 3. The update
// depends only on the global batch: gradients are averaged over ranks, and each micro-batch's
// backward is seeded with 1/accumulation. Buffers per stage: [Note: ZeRO buffers].
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "models/model.hpp"
#include "runtime/config.hpp"
#include "runtime/zero/groups.hpp"
#include "runtime/zero/optimizer_offload.hpp"
#include "runtime/zero/param_offload.hpp"
#include "runtime/zero/scheduler.hpp"
#include "runtime/zero/sharded_unit.hpp"
#include "runtime/zero/unit_group.hpp"
#include "tensor/tape.hpp"

namespace zt {

class ZeroEngine {
 public:
  // Binds `model`'s units to this rank's buffers and hooks the scheduler onto `tape`; all three
  // and `comm` outlive the engine. `wire`: f32, or bf16/f16 ([Note: mixed precision]).
  // With zero.offload_optimizer, AdamW's states live in an OptimizerOffload, with offload_param
  // the stage-3 shards in a ParamOffload; `aio` configures the io_uring engine of device nvme,
  // and construction is then collective (the ranks agree on a swap folder). Construction is
  // collective too where zero.hybrid or hpZ split `comm` into groups ([Note: shard groups]).
  ZeroEngine(Model& model, Tape& tape, Communicator& comm, const ZeroConfig& zero, const OptimizerConfig& opt,
             DType wire = DType::f32, const AioConfig& aio = {});
  ~ZeroEngine();

  int stage() const { return cfg_.stage; }
  // Which ranks the units are sharded over and replicated across ([Note: shard groups]).
  ShardGroups& groups() const { return *shard_groups_; }
  const std::vector<ShardedUnit>& units() const { return units_; }
  const ZeroScheduler& scheduler() const { return *scheduler_; }

  // The model's initialisation, unit by unit (stage 3 never holds more than one unit's parameters).
  void init_params(uint64_t seed);
  // Runs `write`, which fills every unit's full parameters (e.g. from a checkpoint); stage 3 holds
  // the whole model for it, then keeps only its shards.
  void write_full_params(const std::function<void()>& write);
  // Unit by unit, never more than one unit's full parameters: `write(u, begin, end)` fills at
  // least elements [begin, end) of unit u's full parameters (units()[u].param_view(); zeros
  // elsewhere), the ones this rank keeps: its shard at stage 3, the whole unit below.
  // Units from `first` on only (the adapter units after the model's own: models/lora.hpp).
  void write_params_by_unit(const std::function<void(int u, int64_t begin, int64_t end)>& write, int first = 0);
  // Runs `read` with every unit's full parameters present (e.g. to save them).
  void read_full_params(const std::function<void()>& read);
  // Calls `fn(u)` for each unit in turn with its full parameters present (units()[u].param_view());
  // stage 3 gathers each before and releases it after, so no rank holds more than one unit
  // beyond its shards. Collective at stages 1-3.
  // Units [first, last) only (last -1: to the end).
  void for_each_full_unit(const std::function<void(int)>& fn, int first = 0, int last = -1);

  // A step: begin_step, then per micro-batch begin_pass / forward / backward / end_pass, then
  // grad_norm and update. Validation is a pass without backward.
  void begin_step();
  void begin_pass(bool last_micro_batch);
  void end_pass();
  // The global gradient norm (over every rank's shard).
  double grad_norm();
  // Whether any rank's gradients hold an inf or NaN; every rank gets the same answer.
  bool grads_overflowed();
  // Testing aid: makes this rank's gradients non-finite (one element of the first unit's shard),
  // as an fp16 overflow would.
  void poison_grads();
  // AdamW on this rank's shards, then the full parameters that stay (stages 1-2, persistent
  // stage-3 units) are all-gathered again, allgather_bucket_size elements in flight at most.
  // With optimizer offload to NVMe it may return with the update still running ([Note: update
  // behind the next forward]): each unit's next gather completes its part (and gathers it).
  void update(float lr, float grad_scale, int t);
  // Completes an update still running (nothing otherwise).
  void finish_update();

  // [Note: unit state] What a checkpoint holds of each unit on this rank, in regions as long as
  // the unit's master (M elements, [Note: ZeRO buffers]): `param`, the shard the unit gathers
  // from (its full parameters at stage 0), in the wire dtype; `master`, the fp32 master weights
  // (16-bit wire only: in fp32 the parameters are the master); AdamW's `m` and `v` (f32).
  enum class StateRegion : int { param, master, m, v };
  // Calls visit(unit, region, begin, n, data) for every region of every unit, each region in
  // pieces of ascending `begin`: every unit's param, then the optimizer's regions (offloaded
  // ones sub-group by sub-group, master, m and v interleaved). With
  // `load` the visitor fills the data, and what a checkpoint load needs afterwards is done (kept
  // full parameters gathered again). Collective at stages 1-3 when loading. Finishes a running
  // update first.
  using StateVisitor = std::function<void(int unit, StateRegion r, int64_t begin, int64_t n, void* data)>;
  void visit_state(const StateVisitor& visit, bool load);

  // Where offloaded states live, for the log ("" without offload): "optimizer states offloaded to
  // <where> (sub-groups of N elements); parameter shards offloaded to <where>".
  std::string offload_summary() const;

  // Records compute, every collective and the update on their lanes (null: no trace); `t`
  // outlives the engine.
  void set_trace(Trace* t);

 private:
  void gather_all();
  std::vector<Tensor> grad_shards() const;
  void full_params_written(int u);

  Model& model_;
  Communicator& comm_;
  ZeroConfig cfg_;
  std::unique_ptr<ShardGroups> shard_groups_;
  std::vector<ShardedUnit> units_;
  std::vector<std::unique_ptr<UnitGroup>> groups_;  // a model unit with its adapter units
  std::unique_ptr<ZeroScheduler> scheduler_;
  // Declared so that the offloads (their stores and buffers) go before the io_uring engine.
  std::unique_ptr<IoEngine> io_;
  std::unique_ptr<OptimizerOffload> offload_;
  std::unique_ptr<ParamOffload> param_offload_;
  Trace* trace_ = nullptr;
};

}  // namespace zt
