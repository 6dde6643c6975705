#include "runtime/train/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace zt {

namespace {
// DeepSpeed clamps the warmup to at least 2 steps (its log warmup divides by log(steps)).
double warmup_gamma(const SchedulerConfig& s, int step) {
  const int n = std::max(2, s.warmup_num_steps);
  if (step >= n) return 1.0;
  if (s.warmup_type == "linear") return static_cast<double>(step) / n;
  return std::log(static_cast<double>(step) + 1.0) / std::log(static_cast<double>(n));
}
}  // namespace

double learning_rate(const SchedulerConfig& s, double base_lr, int step) {
  const int warmup = std::max(2, s.warmup_num_steps);
  if (s.type == "WarmupLR")
    return s.warmup_min_lr + (s.warmup_max_lr - s.warmup_min_lr) * warmup_gamma(s, step);
  if (s.type == "WarmupDecayLR") {
    double gamma = warmup_gamma(s, step);
    if (step >= warmup)
      gamma = std::max(0.0, static_cast<double>(s.total_num_steps - step) / std::max(1.0, static_cast<double>(s.total_num_steps - warmup)));
    return s.warmup_min_lr + (s.warmup_max_lr - s.warmup_min_lr) * gamma;
  }
  if (s.type == "WarmupCosineLR") {
    if (step < warmup) return base_lr * (s.warmup_min_ratio + (1.0 - s.warmup_min_ratio) * warmup_gamma(s, step));
    const double progress = static_cast<double>(step - warmup + 1) / std::max(1, s.total_num_steps - warmup);
    const double cosine = (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
    return base_lr * std::max(0.0, s.cos_min_ratio + (1.0 - s.cos_min_ratio) * cosine);
  }
  return base_lr;
}

}  // namespace zt
