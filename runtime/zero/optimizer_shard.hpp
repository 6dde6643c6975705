// OptimizerShard: the optimizer's part of one unit on this rank (FSDP2's sharded parameter's
// optimizer side): the fp32 master AdamW updates, m and v, and the hand-off to an offloaded
// optimizer ([Note: optimizer offload]). Its buffers come from the unit's plan ([Note: ZeRO
// buffers]); the unit keeps the parameters and gradients.
//
// The update writes the unit's 16-bit shard from the master ([Note: mixed precision]). With offload
// from a device ([Note: offload from a device]) the update reads the gradient shard from a pinned
// host copy (begin_update brings it down) and writes the 16-bit shard into another, which
// finish_update takes up, unless that shard lives on the host already (parameter offload).
#pragma once

#include <memory>

#include "runtime/zero/optimizer.hpp"
#include "runtime/zero/buffer_plan.hpp"
#include "tensor/tensor.hpp"

namespace zt {

class OptimizerShard {
 public:
  // current: the master holds every update begun; pending: an update began behind the next
  // forward ([Note: update behind the next forward]) and has not finished.
  enum class State { current, pending };

  // `master`, `host_grads`, `host_shard16` as the plan made them; `shard16` the unit's 16-bit
  // shard (undefined in fp32); `grad_shard` the gradients AdamW reads (unless staged through
  // host_grads); `decayed` the weight-decayed ranges within the master.
  OptimizerShard(const OptimizerConfig& cfg, const BufferPlan& plan, Tensor master, Tensor grad_shard, Tensor shard16,
                 Tensor host_grads, Tensor host_shard16, const Ranges& decayed);

  const Tensor& master() const { return master_; }
  const Tensor& m() const { return adam_->m(); }  // undefined where the states are offloaded
  const Tensor& v() const { return adam_->v(); }
  int64_t numel() const { return master_.numel(); }
  // The master is offloaded too (a buffer of its own, 16-bit wire); in fp32 it is the parameters.
  bool master_offloaded() const { return offloaded_ && shard16_.defined(); }
  State state() const { return state_; }

  // AdamW over the whole master (states here), then the 16-bit shard from it; between
  // begin_update() and finish_update(), as step_range.
  void step(float lr, float grad_scale, int t);
  // Offloaded states: master elements [begin, end), with the master (null where it is not
  // offloaded), m and v given at `begin`, between begin_update() and finish_update().
  void step_range(float lr, float grad_scale, int t, int64_t begin, int64_t end, float* master, float* m, float* v);
  void begin_update();
  void finish_update();
  void mark_pending() { state_ = State::pending; }
  // An offloaded master exists here only until the offload has taken it.
  void release_master();

 private:
  Tensor master_, grad_shard_, shard16_, host_grads_, host_shard16_;
  std::unique_ptr<AdamW> adam_;
  bool offloaded_;
  bool staged_;      // [Note: offload from a device]: gradients down, the 16-bit shard up
  bool shard_host_;  // the 16-bit shard itself lives on the host (parameter offload from a device)
  State state_ = State::current;
};

}  // namespace zt
