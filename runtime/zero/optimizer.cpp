#include "runtime/zero/optimizer.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/backend.hpp"
#include "kernels/cpu/kernels.hpp"

namespace zt {

AdamW::AdamW(const OptimizerConfig& cfg, Tensor params, Tensor grads, std::vector<std::pair<int64_t, int64_t>> decayed,
             bool own_states)
    : cfg_(cfg), params_(std::move(params)), grads_(std::move(grads)) {
  if (own_states) {
    m_ = Tensor::zeros(params_.shape(), DType::f32, MemCategory::optimizer, params_.allocator());
    v_ = Tensor::zeros(params_.shape(), DType::f32, MemCategory::optimizer, params_.allocator());
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
  // On the parameters' device: the same kernel per segment as step_range, so the same bits.
  const Backend& be = backend(params_.device());
  for (size_t i = 0; i < segments_.size(); ++i) {
    const auto [b, e] = segments_[i];
    const Shape n{e - b};
    be.adamw_update(params_.view(b, n), Tensor(), grads_.view(b, n), m_.view(b, n), v_.view(b, n),
                    args(lr, grad_scale, t, segment_decays_[i]));
  }
}

AdamWArgs AdamW::args(float lr, float grad_scale, int t, bool decay) const {
  return {lr, static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2), static_cast<float>(cfg_.eps),
          decay ? static_cast<float>(cfg_.weight_decay) : 0.0f, t, grad_scale};
}

void AdamW::step_range(float lr, float grad_scale, int t, int64_t begin, int64_t end, float* p, float* m,
                       float* v) const {
  const float* g = grads_.data<float>();
  for (size_t i = 0; i < segments_.size(); ++i) {
    const int64_t b = std::max(segments_[i].first, begin), e = std::min(segments_[i].second, end);
    if (b >= e) continue;
    const AdamWArgs a = args(lr, grad_scale, t, segment_decays_[i]);
    const int64_t at = b - begin;
    cpu::adamw_update(p + at, g + b, m + at, v + at, static_cast<size_t>(e - b), a.lr, a.beta1, a.beta2, a.eps,
                      a.weight_decay, a.t, a.grad_scale);
  }
}

}  // namespace zt
