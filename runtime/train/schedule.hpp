// Learning-rate schedules with DeepSpeed's names, parameters and formulas, so a DeepSpeed config
// gives the same learning rate at every step.
#pragma once

#include "runtime/config.hpp"

namespace zt {

// The learning rate of optimizer step `step` (0-based); `base_lr` is optimizer.params.lr, which
// WarmupCosineLR scales and the others ignore (they carry their own warmup_max_lr).
double learning_rate(const SchedulerConfig& s, double base_lr, int step);

}  // namespace zt
