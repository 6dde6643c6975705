#include "runtime/zero/sharded_unit.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "runtime/zero/collectives.hpp"
#include "runtime/zero/optimizer_offload.hpp"
#include "runtime/zero/param_offload.hpp"

namespace zt {

ShardedUnit::ShardedUnit(std::string name, int64_t numel, const Ranges& decayed, int stage, bool persistent,
                         ShardGroups& groups, const OptimizerConfig& opt, const UnitOptions& options)
    : name_(std::move(name)),
      stage_(stage),
      persistent_(stage < 3 || persistent),
      groups_(&groups),
      comm_(&groups.shard()),
      geo_(shard_geometry(numel, comm_->size(), comm_->rank())),
      state_(persistent_ ? ParamState::gathered : ParamState::sharded),
      wire_(options.wire),
      memory_(options.memory ? options.memory : &cpu_allocator()),
      narrow_(wire_ != DType::f32 && (options.layout ? options.layout->narrow : backend(memory_->device()).computes_in(wire_))),
      frozen_(options.frozen) {
  const bool on_device = options.layout ? options.layout->on_device : memory_->device() != Device::cpu;
  BufferPlanInput in;
  in.geo = geo_, in.stage = stage_, in.persistent = persistent_, in.wire = wire_, in.narrow = narrow_;
  in.offload_states = options.offload_states, in.offload_param = options.offload_param, in.on_device = on_device;
  in.frozen = frozen_;
  if (const Communicator* sec = groups.secondary(); sec && stage_ == 3 && !persistent_) {
    in.secondary_shard = geo_.padded() / sec->size();
    secondary_begin_ = in.secondary_shard * sec->rank();
  }
  const BufferPlan plan = plan_unit_buffers(in);
  param_offloaded_ = plan.param_offloaded;
  param_host_ = param_offloaded_ && on_device;
  const bool staged = options.offload_states && on_device && !frozen_;
  if ((staged || param_host_) && !mixed())
    throw std::invalid_argument("unit " + name_ + ": " + (staged ? "offload_optimizer" : "offload_param") +
                                " with units on " + std::string(device_name(memory_->device())) +
                                " needs bf16 or fp16 (in fp32 the parameters are the master AdamW updates)");
  std::array<Tensor, kUnitBuffers> made;
  for (int i = 0; i < kUnitBuffers; ++i) {  // a view's buffer comes before it in the table
    const BufferSpec& b = plan.buffers[size_t(i)];
    Allocator& a = b.place == BufferPlace::unit   ? *memory_
                   : b.place == BufferPlace::host ? cpu_allocator()
                                                  : memory_->pinned_host();
    switch (b.life) {
      case BufferLife::none: break;
      case BufferLife::kept: made[size_t(i)] = Tensor::zeros({b.numel}, b.dtype, b.category, a); break;
      case BufferLife::on_use:
      case BufferLife::elsewhere: made[size_t(i)] = Tensor::meta({b.numel}, b.dtype, b.category, a); break;
      case BufferLife::view: made[size_t(i)] = made[size_t(b.of)].view(b.offset, {b.numel}); break;
    }
  }
  auto take = [&](UnitBuffer b) { return std::move(made[size_t(b)]); };
  full_params_ = take(UnitBuffer::full_params);
  full_grads_ = take(UnitBuffer::full_grads);
  grad_shard_ = take(UnitBuffer::grad_shard);
  shard16_ = take(UnitBuffer::shard16);
  wire_params_ = take(UnitBuffer::wire_params);
  wire_grads_ = take(UnitBuffer::wire_grads);
  upload_ = take(UnitBuffer::upload);
  secondary_ = take(UnitBuffer::secondary);
  Tensor master = take(UnitBuffer::master);
  if (frozen_) {  // [Note: frozen units]: no optimizer; an fp32 stage-3 shard sits in the master's row
    frozen_shard_ = std::move(master);
    return;
  }
  const int64_t M = master.numel();
  optim_.emplace(opt, plan, std::move(master), grad_shard_, shard16_, take(UnitBuffer::host_grads),
                 take(UnitBuffer::host_shard16), clip_ranges(decayed, stage_ == 0 ? 0 : geo_.begin(), M));
}

ShardedUnit make_unit(const UnitLayout& lay, const ZeroConfig& z, ShardGroups& groups, const OptimizerConfig& opt,
                      UnitOptions options) {
  Ranges decayed;
  for (const ParamSpec& p : lay.params)
    if (p.decay) decayed.emplace_back(p.offset, p.offset + shape_numel(p.shape));
  options.frozen = lay.frozen();
  return ShardedUnit(lay.name, lay.numel, decayed, z.stage, keeps_full_params(lay.numel, options.frozen, z), groups, opt,
                     options);
}

std::vector<Tensor> ShardedUnit::buffers() const {
  std::vector<Tensor> all;
  for (const Tensor* t : {&full_params_, &full_grads_, &grad_shard_, &shard16_, &wire_params_, &wire_grads_, &upload_,
                          &frozen_shard_, &secondary_})
    if (t->defined()) all.push_back(*t);
  return all;
}

void ShardedUnit::attach_offloads(OptimizerOffload* optimizer, ParamOffload* params, int index) {
  opt_offload_ = optimizer;
  poff_ = params;
  index_ = index;
}

void ShardedUnit::start_gather() {
  if (stage_ == 0) throw std::logic_error("unit " + name_ + ": stage 0 never gathers");
  if (state_ != ParamState::sharded) throw std::logic_error("unit " + name_ + ": gather of a unit that is not sharded");
  // [Note: update behind the next forward]
  if (optim_ && optim_->state() == OptimizerShard::State::pending) opt_offload_->finish_unit(index_);
  if (poff_) poff_->ready(index_);
  full_params_.storage()->materialize();
  param_started_ = Trace::clock::now();
  const Tensor& into = widens() ? wire_params_ : full_params_;
  if (widens()) wire_params_.storage()->materialize();
  if (secondary_fresh_)  // hpZ: within the group, from the secondary shards
    param_work_ = all_gather_params(*groups_->secondary(), secondary_, into);
  else  // in place at stages 1-2, where the shard is this rank's slice of the full buffer
    param_work_ = all_gather_params(*comm_, gather_source(), into);
  state_ = ParamState::gathering;
}

void ShardedUnit::trace(TraceLane lane, const char* what, Trace::clock::time_point begin, const WorkPtr& w) const {
  if (!trace_) return;
  // The backend's completion time where it has one; else now, when completion was seen.
  const auto done = w ? w->completed_at() : Trace::clock::time_point{};
  const auto end = done == Trace::clock::time_point{} ? Trace::clock::now() : done;
  trace_->span(lane, std::string(what) + " " + name_, begin, std::max(begin, end));
}

Tensor ShardedUnit::gather_source() {
  if (!param_host_) return param_shard();
  // Not waited for: the collective is ordered after it, and the host shard stays until the
  // gather completed (done_with in finish_gather).
  upload_.storage()->materialize();
  upload_.copy_from(shard16_, false);
  return upload_;
}

void ShardedUnit::finish_gather() {
  trace(TraceLane::all_gather, "all_gather", param_started_, param_work_);
  param_work_.reset();
  if (param_host_) upload_.storage()->release();
  if (poff_) poff_->done_with(index_);
  if (secondary_.defined() && !secondary_fresh_) {  // hpZ: keep this rank's slice within its group
    secondary_.copy_from((widens() ? wire_params_ : full_params_).view(secondary_begin_, {secondary_.numel()}));
    secondary_fresh_ = true;
  }
  if (widens()) {  // compute widens the 16-bit parameters
    cast_into(wire_params_, full_params_);
    wire_params_.storage()->release();
  }
  state_ = ParamState::gathered;
}

bool ShardedUnit::gather_done() {
  if (state_ == ParamState::gathering && param_work_->test()) finish_gather();
  return state_ == ParamState::gathered;
}

void ShardedUnit::wait_gather() {
  if (state_ != ParamState::gathering) return;
  param_work_->wait();
  finish_gather();
}

void ShardedUnit::release() {
  if (state_ == ParamState::gathering) throw std::logic_error("unit " + name_ + ": release during its gather");
  if (persistent_) return;
  full_params_.storage()->release();
  state_ = ParamState::sharded;
}

void ShardedUnit::materialize_full_params() {
  full_params_.storage()->materialize();
  full_params_.zero();  // the padding stays zero
}

std::pair<int64_t, int64_t> ShardedUnit::write_range() const {
  if (stage_ < 3 || (frozen_ && persistent_)) return {0, geo_.numel};
  return {std::min(geo_.begin(), geo_.numel), std::min(geo_.begin() + geo_.shard, geo_.numel)};
}

void ShardedUnit::full_params_written() {
  secondary_fresh_ = false;
  if (param_offloaded_) param_shard().storage()->materialize();  // written whole below, then stored
  if (frozen_) {
    // [Note: frozen units]: the parameters take the wire's rounding they would take on a gather
    // (every policy computes with the same values); at stage 3 the shard is this rank's slice.
    const Tensor mine = full_params_.view(geo_.begin(), {geo_.shard});
    if (persistent_) {
      if (widens()) round_through(full_params_, wire_, MemCategory::other, *memory_);
    } else if (mixed()) {
      cast_into(mine, shard16_);
    } else {
      frozen_shard_.copy_from(mine);
    }
    state_ = ParamState::gathered;
    return;
  }
  const Tensor& master = optim_->master();
  const int64_t begin = stage_ == 0 ? 0 : geo_.begin();
  if (narrow_) {
    // The writer stored 16-bit values: the master starts from them, the shard is a slice of them
    // except at stage 3.
    const Tensor mine = full_params_.view(begin, {master.numel()});
    master.storage()->materialize();  // an offloaded master is here until the offload takes it
    cast_into(mine, master);
    if (stage_ == 3) shard16_.copy_from(mine);
  } else if (mixed()) {
    // Every rank rounds the same full buffer, so the kept full parameters of stages 0-2 are the
    // 16-bit values everywhere, as if they had been gathered; the master starts from them too.
    const Tensor rounded = round_through(full_params_, wire_, MemCategory::other, *memory_);
    master.storage()->materialize();  // an offloaded master is here until the offload takes it
    cast_into(rounded.view(begin, {master.numel()}), shard16_);
    cast_into(full_params_.view(begin, {master.numel()}), master);
  } else if (stage_ == 3) {
    master.copy_from(full_params_.view(geo_.begin(), {geo_.shard}));
  }
  state_ = ParamState::gathered;
}

void ShardedUnit::begin_step() {
  if (frozen_) return;
  if (grads_ == GradState::held || grads_ == GradState::held_then_zero) {
    grads_ = GradState::held_then_zero;  // the pending update still reads them: zeroed once it has
    return;
  }
  if (stage_ < 2) full_grads_.zero();
  else grad_shard_.zero();
}

void ShardedUnit::prepare_grads() {
  if (frozen_ || full_grads_.has_data()) return;
  full_grads_.storage()->materialize();
  full_grads_.zero();
}

void ShardedUnit::start_reduce(bool scatter) {
  if (frozen_) return;  // nothing to average
  if (grads_ == GradState::reducing)
    throw std::logic_error("unit " + name_ + ": a gradient reduction is already in flight");
  grad_started_ = Trace::clock::now();
  grad_all_reduce_ = stage_ == 0 || !scatter;
  if (groups_->world().size() == 1) return finish_reduce();  // one rank: the average is the gradient itself
  Tensor buf = full_grads_;
  if (widens()) {  // the reduction runs on a 16-bit copy
    wire_grads_.storage()->materialize();
    cast_into(full_grads_, wire_grads_);
    buf = wire_grads_;
  }
  grad_work_ = reduce_grads(*groups_, buf, geo_, grad_all_reduce_);
  grads_ = GradState::reducing;
}

bool ShardedUnit::reduce_done() {
  if (grads_ == GradState::reducing && grad_work_->test()) finish_reduce();
  return grads_ != GradState::reducing;
}

void ShardedUnit::wait_reduce() {
  if (grads_ != GradState::reducing) return;
  grad_work_->wait();
  finish_reduce();
}

void ShardedUnit::finish_reduce() {
  const Tensor slice = full_grads_.view(geo_.begin(), {geo_.shard});
  if (grads_ == GradState::reducing) {
    trace(grad_all_reduce_ ? TraceLane::all_reduce : TraceLane::reduce_scatter,
          grad_all_reduce_ ? "all_reduce" : "reduce_scatter", grad_started_, grad_work_);
    if (widens()) {  // back into the f32 gradients: all of them after an all-reduce, else this rank's slice
      if (grad_all_reduce_) cast_into(wire_grads_, full_grads_);
      else cast_into(wire_grads_.view(geo_.begin(), {geo_.shard}), slice);
      wire_grads_.storage()->release();
    }
  } else if (widens()) {
    // One rank reduces nothing, but the gradients still take the 16-bit rounding they would have
    // taken on the wire, so a run's numbers do not depend on whether there was a wire.
    round_through(full_grads_, wire_, MemCategory::gradients, *memory_);
  }
  grad_work_.reset();
  grads_ = GradState::settled;
  if (stage_ < 2) return;
  accumulate_into_shard(grad_shard_, slice, *memory_);
  full_grads_.storage()->release();
}

void ShardedUnit::update(float lr, float grad_scale, int t) {
  if (frozen_) return;
  begin_update();
  optim_->step(lr, grad_scale, t);
  if (widens() && stage_ == 0) cast_into(shard16_, full_params_);  // stage 0's shard is the whole unit
  finish_update();
}

void ShardedUnit::begin_update() {
  if (state_ == ParamState::gathering) throw std::logic_error("unit " + name_ + ": update during its gather");
  optim_->begin_update();
  if (!poff_) return;
  // The 16-bit shard is rewritten whole from the master; an fp32 master is the shard itself.
  if (mixed()) poff_->make_room(index_);
  else poff_->ready(index_);
}

void ShardedUnit::prefetch_shard() {
  if (poff_) poff_->fetch(index_);
}

void ShardedUnit::finish_update() {
  optim_->finish_update();
  const bool zero = grads_ == GradState::held_then_zero;
  if (grads_ == GradState::held || zero) grads_ = GradState::settled;
  if (zero) begin_step();
  if (poff_) poff_->store(index_);
  updated();
}

void ShardedUnit::updated() {
  if (frozen_) return;  // never stale
  secondary_fresh_ = false;
  if (stage_ > 0 && state_ == ParamState::gathered) state_ = ParamState::sharded;
  if (stage_ == 3 && !persistent_) release();  // a unit held for a whole-model save is stale now
}

void ShardedUnit::state_loaded() {
  if (frozen_) {  // written whole or as its shard, and never stale: a sharded one is released
    if (!persistent_ && state_ == ParamState::gathered) release();
    return;
  }
  if (widens() && stage_ == 0) cast_into(shard16_, full_params_);
  updated();
}

void ShardedUnit::mark_update_pending() {
  if (frozen_) return;
  optim_->mark_pending();
  secondary_fresh_ = false;
  grads_ = GradState::held;
  if (stage_ > 0 && state_ == ParamState::gathered) state_ = ParamState::sharded;
}

}  // namespace zt
