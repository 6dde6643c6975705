// ShardedUnit: one unit's parameters and gradients on this rank (FSDP2's parameter group), the
// state that says where they stand, and its optimizer shard. The scheduler decides when; this class
// knows how, through the buffer plan (runtime/zero/buffer_plan.hpp: which buffers), the
// collectives (runtime/zero/collectives.hpp: how they move) and the OptimizerShard
// (runtime/zero/optimizer_shard.hpp: the master, AdamW and the offload hand-off).
//
// Which buffers a unit has, by stage, precision, device and offload: [Note: ZeRO buffers] in
// runtime/zero/buffer_plan.hpp, the table this class makes them from.
//
// [Note: mixed precision] With a 16-bit wire dtype (bf16.enabled, fp16.enabled) the masters are
// fp32 buffers of their own (counted with AdamW's states, as DeepSpeed counts 12 bytes a
// parameter), each rank keeps its shard of the parameters rounded to 16 bits, and parameters and
// gradients travel in 16 bits: the all-gather fills a 16-bit full buffer, the reductions run on a
// 16-bit copy of the gradients (accumulating in f32, rounded once: comm/communicator.hpp). On the
// CPU compute widens to f32: the model's views are an f32 copy of the 16-bit values, so every
// stage computes with the same rounded parameters. Gradient shards accumulate in f32.
//
// [Note: compute in 16 bits] Where the units' Backend computes in the wire dtype (bf16 on cuda),
// there is no f32 copy: the full parameters and gradients the model uses are the 16-bit buffers
// the collectives fill and reduce, the 16-bit shard is this rank's slice of the full parameters
// at stages 0-2 (as the master is in fp32), and AdamW reads 16-bit gradients at stages 0-1. The
// master and the gradient shards of stages 2-3 stay f32.
//
// [Note: offload from a device] With units on a device, an offloaded optimizer (ZeRO-Offload)
// still runs AdamW on the host over its host or NVMe records: a unit's update first brings its
// gradient shard down into a pinned host buffer (f32), and its end takes the 16-bit shard, written
// into a second pinned buffer group by group, up to the device. The master passes through host
// memory on its way to the store. Parameter offload keeps the 16-bit shards in page-locked host
// memory (the ParamOffload moves them to and from its store as on the CPU): a gather first copies
// the shard up into a device buffer of the unit's, which goes once the gather completed; an
// update writes the shard on the host (cast on the device and copied down, or by the offloaded
// optimizer directly). Both need a 16-bit wire (in fp32 the master is the device's parameters).
//
// [Note: frozen units] A unit whose parameters are all frozen (LoRA's base model) has no
// gradients, no master and no optimizer state: its backward computes no weight gradients (the
// model's views do not require them), it takes part in no reduction and no update, and its
// parameters never go stale. Where it lives is zero_optimization.frozen_params: "sharded" keeps,
// at stage 3, only this rank's shard in the wire dtype and gathers the unit for each use like any
// other (the least memory); "replicated" keeps the full parameters (in the compute dtype) on every
// rank, so the frozen model costs memory and no bandwidth. Below stage 3 it is always kept whole.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "kernels/backend.hpp"
#include "models/model.hpp"
#include "runtime/config.hpp"
#include "runtime/trace.hpp"
#include "runtime/zero/buffer_plan.hpp"
#include "runtime/zero/groups.hpp"
#include "runtime/zero/optimizer_shard.hpp"
#include "runtime/zero/scheduled_unit.hpp"
#include "runtime/zero/shard.hpp"
#include "tensor/tensor.hpp"

namespace zt {

class OptimizerOffload;
class ParamOffload;

struct UnitOptions {
  DType wire = DType::f32;      // f32, or bf16/f16 for [Note: mixed precision]
  // AdamW's m and v, and a master of its own (16-bit wire), live in an OptimizerOffload ([Note:
  // optimizer offload]) rather than here; update_range then takes them.
  bool offload_states = false;
  // The shard this unit gathers from lives in a ParamOffload ([Note: parameter offload]); taken
  // at stage 3 by units that are not persistent.
  bool offload_param = false;
  // Where the unit's buffers live (null: host memory): the communicator's memory(), so that the
  // collectives and the kernels reach them. Flat-buffer work runs on that device's Backend.
  Allocator* memory = nullptr;
  bool frozen = false;  // [Note: frozen units]
  // The layout of the device the buffers stand for, where `memory` is the meta device's ([Note: the
  // meta device] in tensor/meta_allocator.hpp): whether that device's memory is not the host's
  // ([Note: offload from a device]) and whether its Backend computes in the wire dtype ([Note:
  // compute in 16 bits]). Unset: `memory`'s own device's.
  struct Layout {
    bool on_device = false, narrow = false;
  };
  std::optional<Layout> layout;
};

class ShardedUnit final : public ScheduledUnit {
 public:
  // The gradients: settled (nothing in flight), reducing (a reduction in flight), or held: an
  // update behind the next forward still reads them; held_then_zero: and begin_step came, whose
  // zeroing waits for the update's end.
  enum class GradState { settled, reducing, held, held_then_zero };

  // `decayed` lists the unit's weight-decayed element ranges; `groups` ([Note: shard groups])
  // outlives the unit.
  ShardedUnit(std::string name, int64_t numel, const Ranges& decayed, int stage, bool persistent,
              ShardGroups& groups, const OptimizerConfig& opt, const UnitOptions& options = {});
  ShardedUnit(ShardedUnit&&) = default;

  const std::string& name() const override { return name_; }
  const ShardGeometry& geometry() const { return geo_; }
  int64_t numel() const override { return geo_.numel; }
  bool persistent() const override { return persistent_; }
  ParamState state() const override { return state_; }
  bool frozen() const { return frozen_; }

  // The model's views: the first numel() elements of the padded full buffers. Their storage comes
  // and goes with gather/release ([Note: storage that comes and goes] in tensor/tensor.hpp).
  Tensor param_view() const { return full_params_.view(0, {numel()}); }
  Tensor grad_view() const { return frozen_ ? Tensor() : full_grads_.view(0, {numel()}); }  // undefined when frozen
  const Tensor& full_params() const { return full_params_; }
  const Tensor& full_grads() const { return full_grads_; }
  const Tensor& grad_shard() const { return grad_shard_; }
  // The optimizer's side: not for a frozen unit, which has none (master_numel() 0).
  const OptimizerShard& optimizer() const { return *optim_; }
  OptimizerShard& optimizer() { return *optim_; }
  const Tensor& master() const { return optim_->master(); }
  // AdamW's states (undefined where they are offloaded).
  const Tensor& adam_m() const { return optim_->m(); }
  const Tensor& adam_v() const { return optim_->v(); }
  int64_t master_numel() const { return optim_ ? optim_->numel() : 0; }

  // Parameters ([ScheduledUnit]); start_gather materializes the full buffer.
  void start_gather() override;
  bool gather_done() override;
  void wait_gather() override;
  void release() override;
  // After the caller wrote all numel() full parameters (init, checkpoint load): the master takes
  // this rank's slice, and the state is gathered.
  void full_params_written();
  void materialize_full_params();  // stage 3: room for a whole-unit write, contents undefined

  // Gradients. begin_step zeroes what accumulates over the step's micro-batches; the rest as
  // ScheduledUnit says.
  void begin_step();
  void prepare_grads() override;
  void start_reduce(bool scatter) override;
  bool reduce_done() override;
  void wait_reduce() override;
  bool reducing() const override { return grads_ == GradState::reducing; }

  // Every buffer the unit has (a plan tells its collectives apart by them).
  std::vector<Tensor> buffers() const;

  // Records each collective on its lane from start to completion (null: no trace).
  void set_trace(Trace* t) { trace_ = t; }

  // The offloads this unit hands its states to (null: none), and its index in them: set once, by
  // the engine, after both exist.
  void attach_offloads(OptimizerOffload* optimizer, ParamOffload* params, int index);
  // Parameter offload: whether this unit takes part, and the shard it gathers from (its 16-bit
  // shard, or in fp32 its master).
  bool param_offloaded() const { return param_offloaded_; }
  const Tensor& param_shard() const { return mixed() ? shard16_ : optim_ ? optim_->master() : frozen_shard_; }
  // Elements [begin, end) of the full parameters a write of the whole model must fill on this
  // rank: its shard where the unit gathers from one (stage 3, not kept whole), else all of them.
  std::pair<int64_t, int64_t> write_range() const;
  void prefetch_shard() override;

  // AdamW over the master; gradients scaled by grad_scale. Leaves the state sharded where the
  // full parameters must be gathered again.
  void update(float lr, float grad_scale, int t);
  // With offloaded states, the update runs a range at a time (OptimizerShard::step_range)
  // between begin_update() and finish_update(), which do what update() does before and after
  // AdamW.
  void begin_update();
  void finish_update();
  // [Note: update behind the next forward]: the unit's update has begun and not finished. Until it
  // has, the gradients are held, kept full parameters count as stale (sharded), and a gather first
  // has the OptimizerOffload finish it.
  void mark_update_pending();
  // After a checkpoint's shard, master and states were written in: what update() does after
  // AdamW (the full parameters of stage 0 from the shard; stale kept ones for stages 1-3).
  void state_loaded();

 private:
  void finish_reduce();
  void finish_gather();
  void updated();  // after AdamW: the parameters that follow from the master
  Tensor gather_source();  // the shard the all-gather sends, on the unit's device
  bool mixed() const { return wire_ != DType::f32; }
  bool widens() const { return mixed() && !narrow_; }  // compute in f32 over a 16-bit wire
  void trace(TraceLane lane, const char* what, Trace::clock::time_point begin, const WorkPtr& w) const;

  std::string name_;
  int stage_;
  bool persistent_;
  ShardGroups* groups_;
  Communicator* comm_;  // the shard group
  ShardGeometry geo_;
  ParamState state_;
  GradState grads_ = GradState::settled;
  DType wire_;
  Allocator* memory_;
  bool narrow_;  // [Note: compute in 16 bits]
  bool frozen_;
  bool param_offloaded_;
  bool param_host_;  // [Note: offload from a device]: the 16-bit shard lives on the host
  ParamOffload* poff_ = nullptr;
  OptimizerOffload* opt_offload_ = nullptr;
  int index_ = -1;  // this unit's index in the engine (and so in its offloads)
  Tensor full_params_, full_grads_, grad_shard_;
  // [Note: mixed precision] only: this rank's 16-bit parameter shard, and the 16-bit full buffers
  // the collectives fill (present while one is in flight).
  Tensor shard16_, wire_params_, wire_grads_;
  Tensor upload_;  // [Note: offload from a device]: the device copy of a host shard, while its gather runs
  Tensor frozen_shard_;  // [Note: frozen units], fp32 at stage 3: the shard gathered from
  // hpZ ([Note: shard groups]): this rank's slice, within its group, of the gathered wire-dtype
  // parameters; fresh from a gather over the shard group until the parameters change.
  Tensor secondary_;
  bool secondary_fresh_ = false;
  int64_t secondary_begin_ = 0;
  std::optional<OptimizerShard> optim_;  // made in the constructor, from the plan
  WorkPtr param_work_, grad_work_;
  Trace* trace_ = nullptr;
  Trace::clock::time_point param_started_, grad_started_;
  bool grad_all_reduce_ = false;  // the reduction in flight is an all-reduce (its trace lane)
};

// Unit `lay` of a model as the engine makes it: its weight-decayed ranges, whether it keeps its
// full parameters (keeps_full_params), frozen or not; `options` give the rest.
ShardedUnit make_unit(const UnitLayout& lay, const ZeroConfig& z, ShardGroups& groups, const OptimizerConfig& opt,
                      UnitOptions options);

}  // namespace zt
