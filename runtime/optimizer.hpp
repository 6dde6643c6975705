// AdamW over flat buffers: one fused kernel call per run of parameters that share a weight decay.
// The states (m, v) mirror the parameter buffer, so a unit's (later: a shard's) update is a few
// long loops and offload can move a state with one I/O.
#pragma once

#include <utility>
#include <vector>

#include "runtime/config.hpp"
#include "tensor/tensor.hpp"

namespace zt {

class AdamW {
 public:
  // `decayed` lists [begin, end) element ranges of `params` that take weight decay; the rest does
  // not (biases, layernorm weights).
  AdamW(const OptimizerConfig& cfg, Tensor params, Tensor grads, std::vector<std::pair<int64_t, int64_t>> decayed);

  // One update with learning rate `lr`; gradients are multiplied by grad_scale first. `t` is the
  // 1-based step for bias correction.
  void step(float lr, float grad_scale, int t);

  const Tensor& m() const { return m_; }
  const Tensor& v() const { return v_; }

 private:
  OptimizerConfig cfg_;
  Tensor params_, grads_, m_, v_;
  std::vector<std::pair<int64_t, int64_t>> segments_;  // consecutive runs covering all of params
  std::vector<bool> segment_decays_;
};

}  // namespace zt
