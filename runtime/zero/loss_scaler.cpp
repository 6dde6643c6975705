#include "runtime/zero/loss_scaler.hpp"

#include <algorithm>
#include <cmath>

namespace zt {

LossScaler::LossScaler(const PrecisionConfig& p)
    : active_(p.dtype == "f16"),
      dynamic_(active_ && p.loss_scale == 0.0),
      scale_(!active_ ? 1.0 : dynamic_ ? std::ldexp(1.0, p.initial_scale_power) : p.loss_scale),
      min_scale_(p.min_loss_scale),
      window_(p.loss_scale_window),
      hysteresis_(p.hysteresis),
      hysteresis_left_(p.hysteresis),
      consecutive_(p.consecutive_hysteresis) {}

void LossScaler::update(bool overflow) {
  if (!dynamic_) return;
  if (overflow) {
    // Hysteresis lets a few isolated overflows pass before the scale drops.
    if (hysteresis_ == 1 || hysteresis_left_ == 1) scale_ = std::max(scale_ / 2.0, min_scale_);
    else --hysteresis_left_;
    last_overflow_ = iter_;
  } else {
    if (consecutive_) hysteresis_left_ = hysteresis_;  // only overflows in a row count
    if ((iter_ - last_overflow_) % window_ == 0) {
      if (!consecutive_) hysteresis_left_ = hysteresis_;
      scale_ *= 2.0;
    }
  }
  ++iter_;
}

}  // namespace zt
