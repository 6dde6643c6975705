#include "runtime/zero/sharded_unit.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "kernels/cpu/kernels.hpp"
#include "runtime/zero/optimizer_offload.hpp"
#include "runtime/zero/param_offload.hpp"

namespace zt {


void ShardedUnit::cast_into(const Tensor& from, const Tensor& to) const {
  const Backend& be = backend(from.device());
  if (from.device() == to.device()) return be.cast(to, from);
  // Across devices: converted where `from` is, then copied.
  const Tensor converted = Tensor::empty(from.shape(), to.dtype(), MemCategory::communication, from.allocator());
  be.cast(converted, from);
  to.copy_from(converted);
}

// Rounds f32 values to the wire dtype and back, in place; returns the 16-bit copy.
Tensor ShardedUnit::round_through(const Tensor& x, MemCategory c) const {
  Tensor rounded = Tensor::empty(x.shape(), wire_, c, *memory_);
  cast_into(x, rounded);
  cast_into(rounded, x);
  return rounded;
}

ShardedUnit::ShardedUnit(std::string name, int64_t numel, const Ranges& decayed, int stage, bool persistent,
                         Communicator& comm, const OptimizerConfig& opt, const UnitOptions& options)
    : name_(std::move(name)),
      stage_(stage),
      persistent_(stage < 3 || persistent),
      comm_(&comm),
      geo_(shard_geometry(numel, comm.size(), comm.rank())),
      state_(persistent_ ? ParamState::gathered : ParamState::sharded),
      wire_(options.wire),
      memory_(options.memory ? options.memory : &cpu_allocator()),
      backend_(&backend(memory_->device())),
      offload_states_(options.offload_states),
      param_offloaded_(options.offload_param && stage == 3 && !persistent_),
      narrow_(wire_ != DType::f32 && backend_->computes_in(wire_)),
      staged_(offload_states_ && memory_->device() != Device::cpu),
      param_host_(param_offloaded_ && memory_->device() != Device::cpu) {
  const std::string where(device_name(memory_->device()));
  if ((staged_ || param_host_) && !mixed())
    throw std::invalid_argument("unit " + name_ + ": " + (staged_ ? "offload_optimizer" : "offload_param") +
                                " with units on " + where +
                                " needs bf16 or fp16 (in fp32 the parameters are the master AdamW updates)");
  BufferPlanInput in;
  in.geo = geo_, in.stage = stage_, in.persistent = persistent_, in.wire = wire_, in.narrow = narrow_;
  in.offload_states = offload_states_, in.offload_param = options.offload_param;
  in.on_device = memory_->device() != Device::cpu;
  const BufferPlan plan = plan_unit_buffers(in);
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
  master_ = take(UnitBuffer::master);
  full_grads_ = take(UnitBuffer::full_grads);
  grad_shard_ = take(UnitBuffer::grad_shard);
  shard16_ = take(UnitBuffer::shard16);
  wire_params_ = take(UnitBuffer::wire_params);
  wire_grads_ = take(UnitBuffer::wire_grads);
  host_grads_ = take(UnitBuffer::host_grads);
  host_shard16_ = take(UnitBuffer::host_shard16);
  upload_ = take(UnitBuffer::upload);
  // AdamW makes its m and v (beside the master) where the plan has them.
  opt_ = std::make_unique<AdamW>(opt, master_, staged_ ? host_grads_ : grad_shard_,
                                 clip_ranges(decayed, stage_ == 0 ? 0 : geo_.begin(), master_.numel()),
                                 plan[UnitBuffer::adam_m].exists());
}

void ShardedUnit::start_gather() {
  if (stage_ == 0) throw std::logic_error("unit " + name_ + ": stage 0 never gathers");
  if (state_ != ParamState::sharded) throw std::logic_error("unit " + name_ + ": gather of a unit that is not sharded");
  if (update_pending_) opt_offload_->finish_unit(index_);  // [Note: update behind the next forward]
  if (poff_) poff_->ready(index_);
  full_params_.storage()->materialize();
  param_started_ = Trace::clock::now();
  if (narrow_) {  // in place at stages 1-2, as in fp32
    param_work_ = comm_->all_gather_async(gather_source(), full_params_);
  } else if (mixed()) {
    wire_params_.storage()->materialize();
    param_work_ = comm_->all_gather_async(gather_source(), wire_params_);
  } else {
    // In place at stages 1-2 (the master is this rank's slice of the full buffer).
    param_work_ = comm_->all_gather_async(master_, full_params_);
  }
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
  if (!param_host_) return shard16_;
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

void ShardedUnit::full_params_written() {
  if (param_offloaded_) param_shard().storage()->materialize();  // written whole below, then stored
  if (narrow_) {
    // The writer stored 16-bit values: the master starts from them, the shard is a slice of them
    // except at stage 3.
    const Tensor mine = full_params_.view(stage_ == 0 ? 0 : geo_.begin(), {master_.numel()});
    master_.storage()->materialize();  // an offloaded master is here until the offload takes it
    cast_into(mine, master_);
    if (stage_ == 3) shard16_.copy_from(mine);
  } else if (mixed()) {
    // Every rank rounds the same full buffer, so the kept full parameters of stages 0-2 are the
    // 16-bit values everywhere, as if they had been gathered; the master starts from them too.
    const Tensor rounded = round_through(full_params_, MemCategory::other);
    const int64_t begin = stage_ == 0 ? 0 : geo_.begin();
    master_.storage()->materialize();  // an offloaded master is here until the offload takes it
    cast_into(rounded.view(begin, {master_.numel()}), shard16_);
    cast_into(full_params_.view(begin, {master_.numel()}), master_);
  } else if (stage_ == 3) {
    master_.copy_from(full_params_.view(geo_.begin(), {geo_.shard}));
  }
  state_ = ParamState::gathered;
}

void ShardedUnit::begin_step() {
  if (update_pending_) {  // the pending update still reads them: zeroed once it has
    zero_pending_ = true;
    return;
  }
  if (stage_ < 2) full_grads_.zero();
  else grad_shard_.zero();
}

void ShardedUnit::prepare_grads() {
  if (full_grads_.has_data()) return;
  full_grads_.storage()->materialize();
  full_grads_.zero();
}

void ShardedUnit::start_reduce(bool scatter) {
  if (grad_work_) throw std::logic_error("unit " + name_ + ": a gradient reduction is already in flight");
  grad_started_ = Trace::clock::now();
  grad_all_reduce_ = stage_ == 0 || !scatter;
  if (comm_->size() > 1) {
    Tensor buf = full_grads_;
    if (widens()) {  // the reduction runs on a 16-bit copy
      wire_grads_.storage()->materialize();
      cast_into(full_grads_, wire_grads_);
      buf = wire_grads_;
    }
    if (grad_all_reduce_)
      grad_work_ = comm_->all_reduce_async(buf, buf, ReduceOp::avg);
    else
      grad_work_ = comm_->reduce_scatter_async(buf, buf.view(geo_.begin(), {geo_.shard}), ReduceOp::avg);
    return;
  }
  finish_reduce();  // one rank: the average is the gradient itself
}

bool ShardedUnit::reduce_done() {
  if (grad_work_ && grad_work_->test()) finish_reduce();
  return !grad_work_;
}

void ShardedUnit::wait_reduce() {
  if (!grad_work_) return;
  grad_work_->wait();
  finish_reduce();
}

void ShardedUnit::finish_reduce() {
  const Tensor slice = full_grads_.view(geo_.begin(), {geo_.shard});
  if (grad_work_) {
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
    round_through(full_grads_, MemCategory::gradients);
  }
  grad_work_.reset();
  if (stage_ < 2) return;
  if (slice.dtype() == grad_shard_.dtype()) {
    backend_->accumulate(grad_shard_, slice);
  } else {  // 16-bit gradients of one micro-batch into the f32 shard
    const Tensor wide = Tensor::empty(slice.shape(), DType::f32, MemCategory::gradients, *memory_);
    cast_into(slice, wide);
    backend_->accumulate(grad_shard_, wide);
  }
  full_grads_.storage()->release();
}


void ShardedUnit::update(float lr, float grad_scale, int t) {
  if (state_ == ParamState::gathering) throw std::logic_error("unit " + name_ + ": update during its gather");
  begin_update();
  opt_->step(lr, grad_scale, t);
  if (mixed()) {
    cast_into(master_, shard16_);
    if (widens() && stage_ == 0) cast_into(shard16_, full_params_);  // stage 0's shard is the whole unit
  }
  finish_update();
}

void ShardedUnit::begin_update() {
  if (staged_) cast_into(grad_shard_, host_grads_);  // [Note: offload from a device]
  if (!poff_) return;
  // The 16-bit shard is rewritten whole from the master; an fp32 master is the shard itself.
  if (mixed()) poff_->make_room(index_);
  else poff_->ready(index_);
}

void ShardedUnit::prefetch_shard() {
  if (poff_) poff_->fetch(index_);
}

void ShardedUnit::update_range(float lr, float grad_scale, int t, int64_t begin, int64_t end, float* master, float* m,
                               float* v) {
  if (state_ == ParamState::gathering) throw std::logic_error("unit " + name_ + ": update during its gather");
  if (!master_offloaded()) master = master_.data<float>() + begin;
  opt_->step_range(lr, grad_scale, t, begin, end, master, m, v);
  // Offload starts at stage 1, where the 16-bit shard is only this rank's slice.
  if (mixed()) {
    const Tensor& shard = staged_ && !param_host_ ? host_shard16_ : shard16_;
    cpu::cast(static_cast<uint16_t*>(shard.raw()) + begin, wire_, master, DType::f32, static_cast<size_t>(end - begin));
  }
}

void ShardedUnit::finish_update() {
  if (staged_ && !param_host_) shard16_.copy_from(host_shard16_);
  update_pending_ = false;
  if (std::exchange(zero_pending_, false)) begin_step();
  if (poff_) poff_->store(index_);
  if (stage_ > 0 && state_ == ParamState::gathered) state_ = ParamState::sharded;
  if (stage_ == 3 && !persistent_) release();  // a unit held for a whole-model save is stale now
}

void ShardedUnit::state_loaded() {
  if (widens() && stage_ == 0) cast_into(shard16_, full_params_);
  if (stage_ > 0 && state_ == ParamState::gathered) state_ = ParamState::sharded;
  if (stage_ == 3 && !persistent_) release();
}

void ShardedUnit::mark_update_pending() {
  update_pending_ = true;
  if (stage_ > 0 && state_ == ParamState::gathered) state_ = ParamState::sharded;
}

void ShardedUnit::release_master() {
  if (master_offloaded()) master_.storage()->release();
}

}  // namespace zt
