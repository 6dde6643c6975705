#include "runtime/train/metrics.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "files/json_text.hpp"
#include "runtime/file_io.hpp"
#include "runtime/trace.hpp"

namespace zt {

MetricsWriter::MetricsWriter(const std::string& path, int keep_through) : path_(path) {
  std::ifstream earlier;
  if (keep_through >= 0) earlier.open(path);
  if (earlier) {
    // The lines kept are put in place whole before the run appends ([Note: replacing a file]): a
    // run that dies now leaves the history as it was, not cut.
    keep_lines(path, [&](const std::string& l) {
      const nlohmann::json j = parse_json(l).value;  // [Note: JSON from files] in files/json_text.hpp
      return j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() <= keep_through;
    }, "train.metrics");
  }
  errno = 0;
  out_.open(path, earlier.is_open() ? std::ios::app : std::ios::trunc);
  if (!out_) throw std::runtime_error("train.metrics: cannot open '" + path + "' for writing" + reason());
}

std::string MetricsWriter::reason() { return errno ? std::string(": ") + std::strerror(errno) : std::string(); }

void MetricsWriter::line(const std::string& json) {
  errno = 0;
  out_ << json << '\n';
  out_.flush();  // a crashed run still leaves every finished step on disk
  if (!out_) throw std::runtime_error("train.metrics: write to '" + path_ + "' failed" + reason());
}

std::string metrics_json(const StepStats& s) {
  nlohmann::json peak;
  for (size_t c = 0; c < kMemCategories; ++c) peak[std::string(category_name(static_cast<MemCategory>(c)))] = s.mem.peak[c];
  peak["total"] = s.mem.total_peak;
  nlohmann::json j{{"step", s.step}, {"loss", s.loss}, {"lr", s.lr}, {"ms", s.ms}, {"tokens_per_s", s.tokens_per_s},
                   {"tflops", s.tflops}, {"peak_bytes", peak}, {"reserved_bytes", s.mem.reserved_peak},
                   {"rss_peak_bytes", s.rss_peak}, {"comm_bytes", s.comm_bytes},
                   {"comm_bytes_intra", s.comm_bytes - s.comm_bytes_inter}, {"comm_bytes_inter", s.comm_bytes_inter}};
  // JSON has no inf: a skipped step's norm is left out.
  if (std::isfinite(s.grad_norm)) j["grad_norm"] = s.grad_norm;
  if (s.loss_scale > 0) j["loss_scale"] = s.loss_scale;
  if (s.loss_scale > 0 || s.skipped) j["skipped"] = s.skipped;
  if (s.nonfinite) j["nonfinite"] = true;  // (the loss is null then: JSON has no NaN)
  if (s.no_targets) j["no_targets"] = true;  // (so is it here)
  return j.dump();
}

void MetricsWriter::write(const StepStats& s) { line(metrics_json(s)); }

void MetricsWriter::write_val(int step, double val_loss) {
  line(nlohmann::json{{"step", step}, {"val_loss", val_loss}}.dump());
}

std::string human_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string progress_line(const StepStats& s, int total_steps) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %5d/%d | loss %.4f | lr %.3e | grad norm %.3f | %.1f ms | %.0f tok/s | %.1f GFLOP/s | peak %s",
                s.step, total_steps, s.loss, s.lr, s.grad_norm, s.ms, s.tokens_per_s, s.tflops * 1e3,
                human_bytes(s.mem.total_peak).c_str());
  std::string line = buf;
  if (s.comm_bytes > 0)  // several ranks: what this one sent, within its group and across groups
    line += " | sent " + human_bytes(s.comm_bytes - s.comm_bytes_inter) + " intra, " + human_bytes(s.comm_bytes_inter) + " inter";
  if (s.loss_scale > 0) {
    std::snprintf(buf, sizeof buf, " | loss scale %g%s", s.loss_scale, s.skipped && !s.nonfinite ? " | overflow: step skipped" : "");
    line += buf;
  }
  if (s.nonfinite) line += " | non-finite: step skipped (train.skip_nonfinite_steps)";
  if (s.no_targets) line += " | no trained target in the global batch (every target -1): step skipped";
  return line;
}

std::string trace_summary(const Trace& t, const std::string& path) {
  std::string out = "trace written to " + path + "; communication and I/O hidden behind compute on rank " +
                    std::to_string(t.rank()) + ":";
  bool any = false;
  for (TraceLane lane : {TraceLane::all_gather, TraceLane::reduce_scatter, TraceLane::all_reduce, TraceLane::io}) {
    const double busy = t.busy_seconds(lane);
    if (busy <= 0.0) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s %s %.0f%% of %.3f s", any ? "," : "", std::string(trace_lane_name(lane)).c_str(),
                  100.0 * t.hidden_share(lane), busy);
    out += buf;
    any = true;
  }
  return any ? out : out + " no communication or I/O";
}

std::string val_line(int step, double val_loss) {
  char buf[128];
  if (std::isnan(val_loss))  // Trainer::validate: the batches held no counted target
    std::snprintf(buf, sizeof buf, "step %5d | val loss n/a: no trained target in the validation batches", step);
  else
    std::snprintf(buf, sizeof buf, "step %5d | val loss %.4f", step, val_loss);
  return buf;
}

}  // namespace zt
