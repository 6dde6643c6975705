#include "runtime/optimizer.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/cpu/kernels.hpp"

namespace zt {

AdamW::AdamW(const OptimizerConfig& cfg, Tensor params, Tensor grads, std::vector<std::pair<int64_t, int64_t>> decayed,
             bool own_states)
    : cfg_(cfg), params_(std::move(params)), grads_(std::move(grads)) {
  if (own_states) {
    m_ = Tensor::zeros(params_.shape(), DType::f32, MemCategory::optimizer);
    v_ = Tensor::zeros(params_.shape(), DType::f32, MemCategory::optimizer);
  }
  // Cut the buffer into alternating runs with and without decay.
  int64_t at = 0;
  for (auto [b, e] : decayed) {
    if (b < at || e < b || e > params_.numel()) throw std::invalid_argument("AdamW: decay ranges must be sorted and inside the buffer");
    if (b > at) segments_.emplace_back(at, b), segment_decays_.push_back(false);
    if (e > b) segments_.emplace_back(b, e), segment_decays_.push_back(true);
    at = e;
  }
  if (at < params_.numel()) segments_.emplace_back(at, params_.numel()), segment_decays_.push_back(false);
}

void AdamW::step(float lr, float grad_scale, int t) {
  if (!m_.defined()) throw std::logic_error("AdamW::step: the states are offloaded; use step_range");
  step_range(lr, grad_scale, t, 0, params_.numel(), params_.data<float>(), m_.data<float>(), v_.data<float>());
}

void AdamW::step_range(float lr, float grad_scale, int t, int64_t begin, int64_t end, float* p, float* m,
                       float* v) const {
  const float* g = grads_.data<float>();
  for (size_t i = 0; i < segments_.size(); ++i) {
    const int64_t b = std::max(segments_[i].first, begin), e = std::min(segments_[i].second, end);
    if (b >= e) continue;
    const float wd = segment_decays_[i] ? static_cast<float>(cfg_.weight_decay) : 0.0f;
    const int64_t at = b - begin;
    cpu::adamw_update(p + at, g + b, m + at, v + at, static_cast<size_t>(e - b), lr, static_cast<float>(cfg_.beta1),
                      static_cast<float>(cfg_.beta2), static_cast<float>(cfg_.eps), wd, t, grad_scale);
  }
}

}  // namespace zt
