// fp16's dynamic loss scaling, with DeepSpeed's rules (PrecisionConfig in runtime/config.hpp): the
// loss is multiplied by scale() before backward, and every step reports whether any rank's
// gradients overflowed. An overflow skips the step; `hysteresis` overflows (in a row, with
// consecutive_hysteresis) halve the scale, never below min_loss_scale; loss_scale_window steps
// since the last overflow double it. A fixed fp16.loss_scale never moves; f32 and bf16 use 1.
#pragma once

#include "runtime/config.hpp"

namespace zt {

class LossScaler {
 public:
  explicit LossScaler(const PrecisionConfig& p);

  double scale() const { return scale_; }
  bool active() const { return active_; }  // fp16: gradients are checked for overflow
  // After a step's gradients are known on every rank.
  void update(bool overflow);

  // What a checkpoint keeps: the scale and the counters its rules run on.
  struct State {
    double scale = 1.0;
    int hysteresis_left = 0;
    long iter = 0, last_overflow = -1;
  };
  State state() const { return {scale_, hysteresis_left_, iter_, last_overflow_}; }
  void restore(const State& s) {
    scale_ = s.scale;
    hysteresis_left_ = s.hysteresis_left;
    iter_ = s.iter;
    last_overflow_ = s.last_overflow;
  }

 private:
  bool active_, dynamic_;
  double scale_, min_scale_;
  int window_, hysteresis_, hysteresis_left_;
  bool consecutive_;
  long iter_ = 0, last_overflow_ = -1;
};

}  // namespace zt
