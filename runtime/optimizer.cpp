#include "runtime/optimizer.hpp"

#include <stdexcept>

#include "kernels/cpu/kernels.hpp"

namespace zt {

AdamW::AdamW(const OptimizerConfig& cfg, Tensor params, Tensor grads, std::vector<std::pair<int64_t, int64_t>> decayed)
    : cfg_(cfg),
      params_(std::move(params)),
      grads_(std::move(grads)),
      m_(Tensor::zeros(params_.shape(), DType::f32, MemCategory::optimizer)),
      v_(Tensor::zeros(params_.shape(), DType::f32, MemCategory::optimizer)) {
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
  float* p = params_.data<float>();
  const float* g = grads_.data<float>();
  float* m = m_.data<float>();
  float* v = v_.data<float>();
  for (size_t i = 0; i < segments_.size(); ++i) {
    const auto [b, e] = segments_[i];
    const float wd = segment_decays_[i] ? static_cast<float>(cfg_.weight_decay) : 0.0f;
    cpu::adamw_update(p + b, g + b, m + b, v + b, static_cast<size_t>(e - b), lr, static_cast<float>(cfg_.beta1),
                      static_cast<float>(cfg_.beta2), static_cast<float>(cfg_.eps), wd, t, grad_scale);
  }
}

}  // namespace zt
