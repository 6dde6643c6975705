// AdamW over flat buffers: one fused kernel call per run of parameters that share a weight decay.
// The states (m, v) mirror the parameter buffer, so a unit's (later: a shard's) update is a few
// long loops and offload can move a state with one I/O.
#pragma once

#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "runtime/config.hpp"
#include "tensor/tensor.hpp"

namespace zt {

class AdamW {
 public:
  // `decayed` lists [begin, end) element ranges of `params` that take weight decay; the rest does
  // not (biases, layernorm weights).
  // `own_states` false: m and v live elsewhere (offloaded) and come with each step_range call.
  AdamW(const OptimizerConfig& cfg, Tensor params, Tensor grads, std::vector<std::pair<int64_t, int64_t>> decayed,
        bool own_states = true);

  // One update with learning rate `lr`; gradients are multiplied by grad_scale first. `t` is the
  // 1-based step for bias correction. Runs on the parameters' device (its Backend).
  void step(float lr, float grad_scale, int t);
  // The same update of elements [begin, end) only, with the parameters, m and v at p, m, v (each
  // pointing at element `begin`, host memory, as are the gradients: offloaded states); the
  // gradients are this optimizer's. Element by element the arithmetic is step()'s, so updating a
  // buffer in ranges gives the same bits.
  void step_range(float lr, float grad_scale, int t, int64_t begin, int64_t end, float* p, float* m, float* v) const;

  const Tensor& m() const { return m_; }
  const Tensor& v() const { return v_; }

 private:
  AdamWArgs args(float lr, float grad_scale, int t, bool decay) const;

  OptimizerConfig cfg_;
  Tensor params_, grads_, m_, v_;
  std::vector<std::pair<int64_t, int64_t>> segments_;  // consecutive runs covering all of params
  std::vector<bool> segment_decays_;
};

}  // namespace zt
