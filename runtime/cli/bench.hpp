// `ztrain bench`: what each sharding choice costs for one model, batch and set of ranks, as one
// command inside one mpirun job ([Note: bench sweep] in bench.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "tensor/allocator.hpp"

namespace zt {

// One row of the table: a sweep point of ztrain's, or a peer's run of the same model and batch.
struct BenchRow {
  std::string label;             // "zero_optimization.stage=3", or the peer's name
  std::string runner = "ztrain";  // or "torch 2.x FSDP2", "DeepSpeed 0.x ZeRO-3", ...
  std::string error;             // the point failed: why (no numbers then)
  int steps = 0;                 // timed steps
  double ms_median = 0, ms_min = 0, ms_max = 0;
  double tokens_per_s = 0;
  double mfu = 0;  // achieved model FLOP/s per rank over the GEMM rate measured here; 0: unknown
  std::vector<double> losses;  // every step's, the warm-up's included
  // Peaks per rank (the largest over ranks and timed steps), by category, and their sum's peak.
  std::optional<std::array<double, kMemCategories>> peak;
  double peak_total = 0;
  double rss = 0;  // resident set size after the timed steps, the largest over ranks
  double sent_intra = 0, sent_inter = 0;  // bytes rank 0 sends a step, within and across groups
  // Rank 0's collectives, and its offload I/O, per step: the time compute did not run beside
  // (exposed), and the time it did (hidden).
  double comm_exposed_ms = 0, comm_hidden_ms = 0, io_exposed_ms = 0, io_hidden_ms = 0;
  std::optional<double> estimate_total;  // `ztrain estimate`'s peak for the point
  std::optional<double> simulated_ms;    // `ztrain simulate`'s step, with --cluster
};

// [Note: bench sweep] `--sweep KEY=V1,V2,...` axes, crossed (the first axis slowest): each point a
// list of `--set` overrides. A value may be JSON (the commas inside its brackets and strings do not
// split it): an object replaces a whole section. UsageError for a flag without '=' or values.
std::vector<std::vector<std::string>> sweep_points(const std::vector<std::string>& sweeps);

std::string bench_table(const std::vector<BenchRow>& rows, const std::string& header);
std::string bench_json(const std::vector<BenchRow>& rows, const std::string& header);
std::string bench_csv(const std::vector<BenchRow>& rows);

int cmd_bench(int argc, char** argv, ProcessGroup& pg);

}  // namespace zt
