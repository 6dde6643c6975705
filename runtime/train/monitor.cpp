#include "runtime/train/monitor.hpp"

#include <cmath>
#include <filesystem>

#include "runtime/train/csv_monitor.hpp"
#include "runtime/train/tensorboard_file.hpp"

namespace zt {

namespace {

constexpr const char* kAxis = "Train/Samples/";

void add(std::vector<Scalar>& out, const std::string& name, double v) {
  if (std::isfinite(v)) out.push_back({kAxis + name, v});
}

}  // namespace

std::string monitor_folder(const MonitorConfig& m) {
  return (std::filesystem::path(m.output_path) / m.job_name).string();
}

std::vector<Scalar> step_scalars(const StepStats& s, int64_t skipped_steps) {
  std::vector<Scalar> out;
  add(out, "train_loss", s.loss);
  add(out, "lr", s.lr);
  if (s.loss_scale > 0) add(out, "loss_scale", s.loss_scale);
  add(out, "grad_norm", s.grad_norm);
  add(out, "tokens_per_second", s.tokens_per_s);
  add(out, "tflops", s.tflops);
  for (size_t c = 0; c < kMemCategories; ++c)
    add(out, "peak_bytes_" + std::string(category_name(static_cast<MemCategory>(c))), static_cast<double>(s.mem.peak[c]));
  add(out, "peak_bytes_total", static_cast<double>(s.mem.total_peak));
  add(out, "comm_bytes", static_cast<double>(s.comm_bytes));
  add(out, "skipped_steps", static_cast<double>(skipped_steps));
  return out;
}

Monitors::Monitors(const Config& cfg, int resumed_step, int64_t samples_per_step) : samples_per_step_(samples_per_step) {
  const int64_t keep = resumed_step < 0 ? -1 : resumed_step * samples_per_step;
  if (cfg.tensorboard.enabled)
    writers_.push_back(std::make_unique<TensorBoardFile>(monitor_folder(cfg.tensorboard), keep, "tensorboard"));
  if (cfg.csv_monitor.enabled)
    writers_.push_back(std::make_unique<CsvMonitor>(monitor_folder(cfg.csv_monitor), keep, "csv_monitor"));
}

Monitors::~Monitors() = default;

void Monitors::write(const StepStats& s, int64_t skipped_steps) {
  const std::vector<Scalar> scalars = step_scalars(s, skipped_steps);
  for (auto& w : writers_) w->write(s.step * samples_per_step_, scalars);
}

void Monitors::write_val(int step, double val_loss) {
  std::vector<Scalar> scalars;
  add(scalars, "val_loss", val_loss);
  if (scalars.empty()) return;
  for (auto& w : writers_) w->write(step * samples_per_step_, scalars);
}

}  // namespace zt
