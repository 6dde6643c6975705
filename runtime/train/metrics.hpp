// What a run reports: the console lines and the metrics file (JSON lines, one per optimizer step,
// plus one per validation).
#pragma once

#include <fstream>
#include <string>

#include "tensor/allocator.hpp"

namespace zt {

class Trace;

// What one optimizer step did, as the progress line and the metrics file report it.
struct StepStats {
  int step = 0;  // 1-based, after the update
  double loss = 0;       // mean over the step's micro-batches, before the update
  double lr = 0;
  double grad_norm = 0;  // before clipping (inf for a skipped step)
  double loss_scale = 0;  // fp16's, this step's; 0 without fp16
  bool skipped = false;   // no update: fp16's overflow, or a non-finite step under skip_nonfinite_steps
  bool nonfinite = false;  // the loss or (fp32, bf16) the gradient norm was inf or NaN
  bool no_targets = false;  // the global batch held no counted target (all -1): skipped, loss NaN
  double ms = 0;
  double tokens_per_s = 0;
  double tflops = 0;     // achieved, llm.c's FLOP count
  MemSnapshot mem;       // peaks are this step's
  double rss_peak = 0;   // the process's resident high-water mark so far (VmHWM), bytes
  uint64_t comm_bytes = 0;  // sent by this rank in the step ([Note: bytes sent] in comm/communicator.hpp)
  // Of which across groups ([Note: shard groups] in runtime/zero/groups.hpp); the rest within one.
  uint64_t comm_bytes_inter = 0;
};

class MetricsWriter {
 public:
  // Starts the file anew; throws naming the path. A resumed run passes the step it resumed at
  // (keep_through >= 0): the file's lines up to that step stay, the rest go (they belong to the
  // steps about to run again), and the run's lines follow, so one file holds the whole history.
  explicit MetricsWriter(const std::string& path, int keep_through = -1);
  void write(const StepStats& s);
  void write_val(int step, double val_loss);

 private:
  void line(const std::string& json);
  static std::string reason();  // ": <strerror(errno)>" where errno says why, else ""
  std::string path_;
  std::ofstream out_;
};

// The metrics file's line for a step: one JSON object.
std::string metrics_json(const StepStats& s);
std::string progress_line(const StepStats& s, int total_steps);
std::string val_line(int step, double val_loss);
std::string human_bytes(size_t bytes);
// "trace written to PATH; this rank's communication hidden behind compute: all_gather 62% of
// 1.20 s, ..." over the lanes that saw any time.
std::string trace_summary(const Trace& t, const std::string& path);

}  // namespace zt
