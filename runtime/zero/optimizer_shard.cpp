#include "runtime/zero/optimizer_shard.hpp"

#include "kernels/cpu/kernels.hpp"
#include "runtime/zero/collectives.hpp"

namespace zt {

OptimizerShard::OptimizerShard(const OptimizerConfig& cfg, const BufferPlan& plan, Tensor master, Tensor grad_shard,
                               Tensor shard16, Tensor host_grads, Tensor host_shard16, const Ranges& decayed)
    : master_(std::move(master)),
      grad_shard_(std::move(grad_shard)),
      shard16_(std::move(shard16)),
      host_grads_(std::move(host_grads)),
      host_shard16_(std::move(host_shard16)),
      offloaded_(!plan[UnitBuffer::adam_m].exists()),
      staged_(host_grads_.defined()),
      shard_host_(plan[UnitBuffer::shard16].place == BufferPlace::pinned) {
  // AdamW makes its m and v beside the master where the plan has them.
  adam_ = std::make_unique<AdamW>(cfg, master_, staged_ ? host_grads_ : grad_shard_, decayed, !offloaded_);
}

void OptimizerShard::step(float lr, float grad_scale, int t) {
  adam_->step(lr, grad_scale, t);
  if (shard16_.defined()) cast_into(master_, shard16_);
}

void OptimizerShard::begin_update() {
  if (staged_) cast_into(grad_shard_, host_grads_);
}

void OptimizerShard::step_range(float lr, float grad_scale, int t, int64_t begin, int64_t end, float* master, float* m,
                                float* v) {
  // A plan's buffers (the meta device, [Note: the meta device]) hold nothing to compute with: its
  // update is the hand-off alone.
  if (grad_shard_.device() == Device::meta) return;
  if (!master_offloaded()) master = master_.data<float>() + begin;
  adam_->step_range(lr, grad_scale, t, begin, end, master, m, v);
  // Offload starts at stage 1, where the 16-bit shard is only this rank's slice.
  if (!shard16_.defined()) return;
  const Tensor& shard = staged_ && !shard_host_ ? host_shard16_ : shard16_;
  cpu::cast(static_cast<uint16_t*>(shard.raw()) + begin, shard.dtype(), master, DType::f32,
            static_cast<size_t>(end - begin));
}

void OptimizerShard::finish_update() {
  if (staged_ && !shard_host_) shard16_.copy_from(host_shard16_);
  state_ = State::current;
}

void OptimizerShard::release_master() {
  if (master_offloaded()) master_.storage()->release();
}

}  // namespace zt
