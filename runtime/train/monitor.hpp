// DeepSpeed's monitors: the `tensorboard` and `csv_monitor` sections, written by rank 0 beside the
// metrics file (JSON lines, runtime/train/metrics.hpp), from the same numbers.
//
// [Note: monitor scalars] What a step reports goes to the monitors as DeepSpeed's engine names it,
// on DeepSpeed's axis: the samples seen so far (the step times the global batch), so curves from
// ztrain and DeepSpeed runs of one batch size overlay. Train/Samples/train_loss, lr and (fp16)
// loss_scale are DeepSpeed's own tags; grad_norm, tokens_per_second, tflops, the peak of each
// memory category (peak_bytes_<category>, and _total), comm_bytes (what rank 0 sent in the step),
// skipped_steps (the run's count so far: the steps without an update) and val_loss follow its
// pattern. A value that is not finite (the loss of a step without trained targets, a skipped step's
// gradient norm) is left out, as the metrics line leaves it null or out. step_scalars is the one
// list; the monitors only lay it out in their files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/train/metrics.hpp"

namespace zt {

struct Scalar {
  std::string tag;
  double value = 0;
};

// One file format's writer. A resumed run passes the axis value it resumed at (keep_through >= 0):
// what the files hold past it belongs to the steps about to run again and goes; a fresh run passes
// -1. Errors are std::runtime_errors naming the section and the path.
class Monitor {
 public:
  virtual ~Monitor() = default;
  virtual void write(int64_t samples, const std::vector<Scalar>& scalars) = 0;
};

// The scalars of one step ([Note: monitor scalars]); skipped_steps counts the run's steps so far
// that made no update.
std::vector<Scalar> step_scalars(const StepStats& s, int64_t skipped_steps);

// The monitors a config enables, made on rank 0 for a run that resumed at `resumed_step` (-1: a
// fresh run) with `samples_per_step` samples in a global batch.
class Monitors {
 public:
  Monitors(const Config& cfg, int resumed_step, int64_t samples_per_step);
  ~Monitors();
  void write(const StepStats& s, int64_t skipped_steps);
  void write_val(int step, double val_loss);

 private:
  std::vector<std::unique_ptr<Monitor>> writers_;
  int64_t samples_per_step_;
};

// The folder a monitor section writes into: output_path/job_name, as DeepSpeed joins them.
std::string monitor_folder(const MonitorConfig& m);

}  // namespace zt
