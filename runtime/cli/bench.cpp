#include "runtime/cli/bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernels/cpu/gemm.hpp"
#include "runtime/agreed.hpp"
#include "runtime/cli/bench_peers.hpp"
#include "runtime/cli/cli_flags.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/config.hpp"
#include "runtime/file_io.hpp"
#include "kernels/cpu/kernels.hpp"
#include "runtime/plan/cluster.hpp"
#include "runtime/plan/estimate.hpp"
#include "runtime/plan/simulate.hpp"
#include "runtime/trace.hpp"
#include "runtime/train/memory_floor.hpp"
#include "runtime/train/trainer.hpp"

namespace zt {

// [Note: bench sweep] `ztrain bench` builds one Trainer per point of the sweep inside the one
// mpirun job, runs --warmup steps, times --steps more (a trace kept in memory from the first timed
// step says how much of the collectives' time compute ran beside), reduces the numbers over the
// ranks, destroys the Trainer and empties the allocators' caches (so one point's memory does not
// count in the next's resident set). A point whose configuration the ranks refuse together (a bad
// key, a model that does not fit the host's memory: [Note: memory floor]) becomes a row with the
// reason and the sweep goes on; a failure of one rank alone ends the job as in `ztrain train`
// ([Note: failing the job] in comm/process_group.hpp). The points run with the run's outputs off
// (no checkpoints, metrics, trace file or saved model): the bench measures steps only.

std::vector<std::vector<std::string>> sweep_points(const std::vector<std::string>& sweeps) {
  std::vector<std::vector<std::string>> points{{}};
  for (const std::string& s : sweeps) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
      throw UsageError("--sweep expects KEY=V1,V2,..., got '" + s + "'");
    const std::string key = s.substr(0, eq);
    // Values split at the commas outside JSON brackets and strings, so that a value may be an
    // object setting several keys of a section at once: activation_checkpointing={"mode":"none"},{...}.
    std::vector<std::string> values(1);
    int depth = 0;
    bool quoted = false;
    for (size_t i = eq + 1; i < s.size(); ++i) {
      const char ch = s[i];
      if (quoted) quoted = !(ch == '"' && s[i - 1] != '\\');
      else if (ch == '"') quoted = true;
      else if (ch == '{' || ch == '[') ++depth;
      else if (ch == '}' || ch == ']') --depth;
      if (ch == ',' && depth == 0 && !quoted) {
        values.emplace_back();
        continue;
      }
      values.back() += ch;
    }
    for (const std::string& v : values)
      if (v.empty()) throw UsageError("--sweep " + key + ": an empty value in '" + s + "'");
    std::vector<std::vector<std::string>> crossed;
    for (const auto& p : points)
      for (const std::string& v : values) {
        crossed.push_back(p);
        crossed.back().push_back(key + "=" + v);
      }
    points = std::move(crossed);
  }
  return points;
}

namespace {

constexpr std::array<MemCategory, 5> kShownCategories = {MemCategory::parameters, MemCategory::gradients,
                                                          MemCategory::optimizer, MemCategory::activations,
                                                          MemCategory::communication};

double mib(double bytes) { return bytes / double(1 << 20); }

// This rank's single-precision GEMM rate (FLOP/s) with the threads it trains with, all ranks at
// once: MFU's denominator, measured rather than taken from a data sheet.
double gemm_rate(Communicator& world) {
  const int n = 512;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  double best = 0;
  world.barrier_async()->wait();
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    cpu::sgemm(false, false, n, n, n, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s);
  }
  return best;
}

// The largest value over the ranks of each of `v`.
void max_over_ranks(Communicator& world, std::vector<double>& v) {
  if (world.size() == 1) return;
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::f32, MemCategory::other);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = float(v[i]);
  world.all_reduce(t, ReduceOp::max);
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct BenchOptions {
  std::string config, format = "table", out, plot, cluster, python;
  std::vector<std::string> overrides, sweeps;
  int steps = 3, warmup = 1;
  bool peers = false;
};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

BenchRow run_point(const BenchOptions& o, const std::vector<std::string>& point, Communicator& world, double rate,
                   const std::optional<Cluster>& cluster) {
  BenchRow row;
  row.label = point.empty() ? "(the config)" : join(point, ", ");
  forget_failing_together();
  try {
    Config cfg;
    agreed<ConfigError>(world, "reading the point's configuration", [&] {
      std::vector<std::string> ov = o.overrides;
      ov.insert(ov.end(), point.begin(), point.end());
      cfg = load_config(o.config, ov);
    });
    cfg.checkpoint.save_interval = 0;
    cfg.train.save_model.clear();
    cfg.train.metrics.clear();
    cfg.train.trace.clear();
    cfg.train.resume.clear();
    cfg.train.steps = std::max(cfg.train.steps, o.warmup + o.steps);
    try {  // the estimate and the simulation refuse what the run refuses; the run says why below
      row.estimate_total = double(estimate_memory(cfg, world.size(), world.local_size()).stages.at(size_t(cfg.zero.stage)).total);
      if (cluster) row.simulated_ms = simulate_step(cfg, world.size(), *cluster).step_s * 1e3;
    } catch (const ConfigError&) {
    }
    Trainer t(cfg, world);
    for (int i = 0; i < o.warmup; ++i) row.losses.push_back(t.step().loss);
    const Trace& trace = t.start_trace();
    std::vector<double> ms, intra, inter;
    std::vector<double> peaks(kMemCategories + 2, 0.0);  // categories, their sum, the resident set
    for (int i = 0; i < o.steps; ++i) {
      const StepStats s = t.step();
      row.losses.push_back(s.loss);
      ms.push_back(s.ms);
      intra.push_back(double(s.comm_bytes - s.comm_bytes_inter));
      inter.push_back(double(s.comm_bytes_inter));
      for (size_t c = 0; c < kMemCategories; ++c) peaks[c] = std::max(peaks[c], double(s.mem.peak[c]));
      peaks[kMemCategories] = std::max(peaks[kMemCategories], double(s.mem.total_peak));
    }
    peaks[kMemCategories + 1] = resident_bytes();
    for (TraceLane lane : {TraceLane::all_gather, TraceLane::reduce_scatter, TraceLane::all_reduce, TraceLane::io}) {
      const double busy = trace.busy_seconds(lane), hidden = trace.hidden_share(lane);
      (lane == TraceLane::io ? row.io_hidden_ms : row.comm_hidden_ms) += busy * hidden * 1e3 / o.steps;
      (lane == TraceLane::io ? row.io_exposed_ms : row.comm_exposed_ms) += busy * (1.0 - hidden) * 1e3 / o.steps;
    }
    max_over_ranks(world, peaks);
    row.steps = o.steps;
    row.ms_median = median(ms);
    row.ms_min = *std::min_element(ms.begin(), ms.end());
    row.ms_max = *std::max_element(ms.begin(), ms.end());
    const Config& c = t.config();
    const double tokens = double(c.micro_batch) * c.data.seq_len * c.grad_accum * world.size();
    row.tokens_per_s = tokens / (row.ms_median / 1e3);
    if (c.train.device == "cpu" && rate > 0)
      row.mfu = t.model().flops_per_token(c.data.seq_len) * row.tokens_per_s / world.size() / rate;
    row.peak.emplace();
    for (size_t i = 0; i < kMemCategories; ++i) (*row.peak)[i] = peaks[i];
    row.peak_total = peaks[kMemCategories];
    row.rss = peaks[kMemCategories + 1];
    row.sent_intra = median(intra);
    row.sent_inter = median(inter);
  } catch (const std::exception& e) {
    // [Note: bench sweep]: an error every rank raised together is this point's; one rank's own
    // ends the job.
    if (failing_together() == Together::no) throw;
    row.error = e.what();
    row.losses.clear();
  }
  empty_caches(world.memory());
  return row;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string bench_table(const std::vector<BenchRow>& rows, const std::string& header) {
  std::string out = header + "\n\n";
  out += "| point | runner | ms/step (min-max) | tokens/s | MFU | params / grads / optim / acts / comm MiB | peak MiB "
         "| estimate MiB | RSS MiB | sent intra / inter MiB | comm exposed / hidden ms | I/O exposed / hidden ms "
         "| simulated ms | x first |\n";
  out += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const BenchRow* first = nullptr;
  for (const BenchRow& r : rows)
    if (r.error.empty()) {
      first = &r;
      break;
    }
  for (const BenchRow& r : rows) {
    out += "| " + r.label + " | " + r.runner + " | ";
    if (!r.error.empty()) {
      out += "failed: " + r.error + " | | | | | | | | | | | |\n";
      continue;
    }
    out += fixed(r.ms_median, 1) + " (" + fixed(r.ms_min, 1) + "-" + fixed(r.ms_max, 1) + ") | " +
           fixed(r.tokens_per_s, 0) + " | " + (r.mfu > 0 ? fixed(100 * r.mfu, 1) + "%" : "-") + " | ";
    if (r.peak) {
      std::string cats;
      for (MemCategory c : kShownCategories) cats += (cats.empty() ? "" : " / ") + fixed(mib((*r.peak)[size_t(c)]), 1);
      out += cats + " | " + fixed(mib(r.peak_total), 1) + " | ";
    } else {
      out += "- | - | ";  // a peer's tensors are not counted by category
    }
    if (r.estimate_total && r.peak_total > 0)
      out += fixed(mib(*r.estimate_total), 1) + " (" + (*r.estimate_total >= r.peak_total ? "+" : "") +
             fixed(100 * (*r.estimate_total / r.peak_total - 1), 1) + "%) | ";
    else
      out += "- | ";
    out += (r.rss > 0 ? fixed(mib(r.rss), 0) : std::string("-")) + " | ";
    out += r.runner == "ztrain" ? fixed(mib(r.sent_intra), 1) + " / " + fixed(mib(r.sent_inter), 1) + " | " +
                                      fixed(r.comm_exposed_ms, 1) + " / " + fixed(r.comm_hidden_ms, 1) + " | " +
                                      fixed(r.io_exposed_ms, 1) + " / " + fixed(r.io_hidden_ms, 1) + " | "
                                : "- | - | - | ";
    out += (r.simulated_ms ? fixed(*r.simulated_ms, 1) : std::string("-")) + " | ";
    out += (first ? fixed(r.ms_median / first->ms_median, 2) : std::string("-")) + " |\n";
  }
  out += "\npeak: the largest over ranks and timed steps of the sum of the categories (tensor memory the "
         "allocators hand out); estimate: `ztrain estimate`'s for the point (in brackets against the peak); RSS: "
         "the process's resident set after the timed steps; sent: what rank 0 sends a step; comm: rank 0's "
         "collectives and I/O a step, the time compute did not run beside (exposed) and did (hidden), and so for its offload I/O; MFU: model "
         "FLOP/s per rank over this machine's measured GEMM rate; x first: step time over the first row's.\n";
  return out;
}

std::string bench_json(const std::vector<BenchRow>& rows, const std::string& header) {
  nlohmann::json out{{"header", header}, {"rows", nlohmann::json::array()}};
  for (const BenchRow& r : rows) {
    nlohmann::json j{{"label", r.label}, {"runner", r.runner}};
    if (!r.error.empty()) {
      j["error"] = r.error;
    } else {
      j.update({{"steps", r.steps}, {"ms_median", r.ms_median}, {"ms_min", r.ms_min}, {"ms_max", r.ms_max},
                {"tokens_per_s", r.tokens_per_s}, {"losses", r.losses}, {"peak_total_bytes", r.peak_total},
                {"rss_bytes", r.rss}});
      if (r.mfu > 0) j["mfu"] = r.mfu;
      if (r.peak) {
        nlohmann::json p;
        for (size_t c = 0; c < kMemCategories; ++c) p[std::string(category_name(MemCategory(c)))] = (*r.peak)[c];
        j["peak_bytes"] = p;
      }
      if (r.runner == "ztrain")
        j.update({{"sent_intra_bytes", r.sent_intra}, {"sent_inter_bytes", r.sent_inter},
                  {"comm_exposed_ms", r.comm_exposed_ms}, {"comm_hidden_ms", r.comm_hidden_ms},
                  {"io_exposed_ms", r.io_exposed_ms}, {"io_hidden_ms", r.io_hidden_ms}});
      if (r.estimate_total) j["estimate_total_bytes"] = *r.estimate_total;
      if (r.simulated_ms) j["simulated_ms"] = *r.simulated_ms;
    }
    out["rows"].push_back(j);
  }
  return out.dump(1) + "\n";
}

std::string bench_csv(const std::vector<BenchRow>& rows) {
  std::string out = "label,runner,error,ms_median,ms_min,ms_max,tokens_per_s,mfu";
  for (MemCategory c : kShownCategories) out += ",peak_" + std::string(category_name(c)) + "_bytes";
  out += ",peak_total_bytes,estimate_total_bytes,rss_bytes,sent_intra_bytes,sent_inter_bytes,comm_exposed_ms,"
         "comm_hidden_ms,io_exposed_ms,io_hidden_ms,simulated_ms\n";
  auto quoted = [](std::string s) {
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  auto num = [](double v) { return fixed(v, 6); };
  for (const BenchRow& r : rows) {
    out += quoted(r.label) + "," + quoted(r.runner) + "," + quoted(r.error);
    if (!r.error.empty()) {
      out += std::string(20, ',') + "\n";
      continue;
    }
    // Field by field: GCC 12 reports a chain of string sums here as overlapping copies (-Wrestrict).
    auto field = [&out](const std::string& v) {
      out += ',';
      out += v;
    };
    for (double v : {r.ms_median, r.ms_min, r.ms_max, r.tokens_per_s}) field(num(v));
    field(r.mfu > 0 ? num(r.mfu) : std::string());
    for (MemCategory c : kShownCategories) field(r.peak ? fixed((*r.peak)[size_t(c)], 0) : std::string());
    field(fixed(r.peak_total, 0));
    field(r.estimate_total ? fixed(*r.estimate_total, 0) : std::string());
    for (double v : {r.rss, r.sent_intra, r.sent_inter}) field(fixed(v, 0));
    for (double v : {r.comm_exposed_ms, r.comm_hidden_ms, r.io_exposed_ms, r.io_hidden_ms}) field(num(v));
    field(r.simulated_ms ? num(*r.simulated_ms) : std::string());
    out += '\n';
  }
  return out;
}

int cmd_bench(int argc, char** argv, ProcessGroup& pg) {
  BenchOptions o;
  Communicator& world = pg.world();
  std::optional<Cluster> cluster;
  agreed(world, "reading the command line", [&] {
    for (auto& [flag, value] : parse_command(*find_command("bench"), argc, argv, 2).flags) {
      if (flag == "--config") o.config = value;
      else if (flag == "--set") o.overrides.push_back(value);
      else if (flag == "--sweep") o.sweeps.push_back(value);
      else if (flag == "--steps") o.steps = static_cast<int>(int_flag(flag, value, 1, 100000));
      else if (flag == "--warmup") o.warmup = static_cast<int>(int_flag(flag, value, 0, 100000));
      else if (flag == "--format") o.format = value;
      else if (flag == "--out") o.out = value;
      else if (flag == "--plot") o.plot = value;
      else if (flag == "--cluster") o.cluster = value;
      else if (flag == "--python") o.python = value;
      else o.peers = true;
    }
    if (o.config.empty()) throw UsageError("bench needs --config FILE");
    if (o.format != "table" && o.format != "json" && o.format != "csv")
      throw UsageError("--format must be table, json or csv, got '" + o.format + "'");
    if (o.sweeps.empty()) o.sweeps.push_back("zero_optimization.stage=0,1,2,3");
    if (!o.cluster.empty()) cluster = load_cluster(o.cluster);
    // A sweep may take hours: an output that cannot be written fails now, not after it.
    if (pg.rank() == 0) {
      // A ReplacedFile makes its temporary file beside the target and, never committed, removes it.
      if (!o.out.empty()) ReplacedFile probe(o.out, "bench --out");
      if (!o.plot.empty()) ReplacedFile probe(o.plot, "bench --plot");
    }
  });
  const std::vector<std::vector<std::string>> points = sweep_points(o.sweeps);

  // The settings every point shares, for the header and the peers: the config with --set only.
  Config base;
  agreed<ConfigError>(world, "reading the configuration", [&] { base = load_config(o.config, o.overrides); });
  cpu::set_num_threads(train_threads(base, world.local_size()));  // the points' own, for the GEMM rate
  const double rate = gemm_rate(world);
  char header[512];
  std::snprintf(header, sizeof header,
                "ztrain bench: %s, model %s, micro-batch %d x seq_len %d x accumulation %d x %d ranks (%d on this host), "
                "%d threads a rank; %d warm-up + %d timed steps a point; GEMM %.1f GFLOP/s a rank (%s)",
                o.config.c_str(), base.model.arch.c_str(), base.micro_batch, base.data.seq_len, base.grad_accum, world.size(),
                world.local_size(), cpu::num_threads(), o.warmup, o.steps, rate / 1e9, cpu::gemm_library());

  std::vector<BenchRow> rows;
  for (const auto& point : points) {
    rows.push_back(run_point(o, point, world, rate, cluster));
    if (pg.rank() == 0) {
      const BenchRow& r = rows.back();
      write_line(STDERR_FILENO, "bench: " + r.label + ": " +
                                    (r.error.empty() ? fixed(r.ms_median, 1) + " ms a step" : "failed: " + r.error));
    }
  }
  if (o.peers) {
    // The peers run on rank 0's host as processes of their own; the other ranks wait without
    // spinning on a core the peers need ([Note: bench peers] in bench_peers.hpp).
    if (pg.rank() == 0) {
      try {
        std::vector<BenchRow> peer_rows = run_peers(base, world.size(), o.warmup, o.steps, o.python, cpu::num_threads());
        // The peers' MFU from the model's FLOPs per token that ztrain's rows were measured with.
        for (const BenchRow& z : rows)
          if (z.error.empty() && z.mfu > 0) {
            const double flops_per_token = z.mfu * world.size() * rate / z.tokens_per_s;
            for (BenchRow& p : peer_rows)
              if (p.error.empty()) p.mfu = flops_per_token * p.tokens_per_s / world.size() / rate;
            break;
          }
        rows.insert(rows.end(), peer_rows.begin(), peer_rows.end());
      } catch (const std::exception& e) {
        BenchRow r;
        r.label = "peers";
        r.runner = "peer";
        r.error = e.what();
        rows.push_back(r);
      }
    }
    wait_for_ranks(world);
  }
  agreed(world, "writing the results", [&] {
    if (pg.rank() != 0) return;
    const std::string text = o.format == "json" ? bench_json(rows, header)
                             : o.format == "csv" ? bench_csv(rows)
                                                 : bench_table(rows, header);
    std::cout << text << std::flush;
    if (!o.out.empty()) write_atomically(o.out, bench_json(rows, header), "bench --out");  // the record scripts read
    if (!o.plot.empty()) plot_bench(bench_json(rows, header), o.plot, o.python);
  });
  return 0;
}

}  // namespace zt
