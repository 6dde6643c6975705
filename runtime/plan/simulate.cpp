#include "runtime/plan/simulate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "comm/communicator.hpp"
#include "runtime/plan/ghost_step.hpp"
#include "runtime/train/metrics.hpp"

namespace zt {

namespace {

// `n` ranks of a group, consecutive ranks `stride` apart, on nodes of `per_node` devices.
GroupShape shape_of(int n, int stride, int per_node) {
  GroupShape s;
  s.ranks = n;
  s.per_node = stride >= per_node ? 1 : std::min(n, per_node / stride);
  s.nodes = (n + s.per_node - 1) / s.per_node;
  return s;
}

// The simulated clock of [Note: step simulation].
class SimClock final : public GhostClock {
 public:
  explicit SimClock(const Cluster& c) : c_(c) {}

  void set_groups(const GhostGroups& g) {
    groups_ = g;
    const int d = c_.devices_per_node;
    shapes_[size_t(GhostGroup::world)] = shape_of(g.world, 1, d);
    shapes_[size_t(GhostGroup::shard)] = shape_of(g.shard, 1, d);
    shapes_[size_t(GhostGroup::replicas)] = shape_of(g.replicas(), g.shard, d);
    shapes_[size_t(GhostGroup::secondary)] = shape_of(g.secondary, 1, d);
  }
  // From here on the step being measured: spans and totals start again, times count from now.
  void restart() {
    origin_ = now_;
    sim_ = Simulation{};
    open_.clear();
  }
  Simulation& result() { return sim_; }
  double elapsed() const { return now_ - origin_; }

  void add(const OpCost& op) override {
    if (op.flat) return flat_work(op.op, op.bytes);
    double t = op.bytes / (c_.memory_bandwidth * c_.efficiency[2]);
    if (op.flops > 0) t = std::max(t, op.flops / (c_.flops * c_.efficiency[size_t(op.cls)]));
    sim_.executed_flops += op.flops;
    compute(t, op.cls);
  }
  int issue(TraceLane kind, GhostGroup g, double bytes, int after, const std::string& name) override {
    Op op{kind, g, after, name, collective_seconds(c_, kind, shapes_[size_t(g)], bytes)};
    sim_.comm_s[size_t(collective_index(kind))] += op.seconds;
    (groups_.inter(g) ? sim_.comm_bytes_inter : sim_.comm_bytes_intra) += bytes_sent(kind, shapes_[size_t(g)].ranks, bytes);
    ops_.push_back(op);
    const int id = static_cast<int>(ops_.size()) - 1;
    if (c_.progress == Progress::async) schedule(ops_.back());
    return id;
  }
  bool done(int id) override {
    if (c_.progress == Progress::polled) poll();
    return ops_[size_t(id)].end <= now_;
  }
  void wait(int id) override {
    if (c_.progress == Progress::polled) poll();
    const double t = ops_[size_t(id)].end;
    if (t <= now_) return;
    sim_.exposed_s += t - now_;
    now_ = t;
  }
  // The host's own work of a step outside the model and the engine: the data, the loss.
  void step_overhead() {
    if (c_.step_overhead <= 0) return;
    sim_.flat_work_s["host"] += c_.step_overhead;
    compute(c_.step_overhead, OpClass::memory);
  }
  void flat_work(const char* what, double bytes) override {
    const double t = bytes / (c_.memory_bandwidth * c_.efficiency[2]);
    sim_.flat_work_s[what] += t;
    compute(t, OpClass::memory);
  }
  void unit_span(const std::string& span, bool begin) override {
    // Polled progress: the scheduler tests every operation in flight at each unit boundary.
    if (c_.progress == Progress::polled) poll();
    if (begin) {
      open_[span] = now_;
      return;
    }
    const auto it = open_.find(span);
    if (it == open_.end()) return;
    sim_.spans.push_back({TraceLane::compute, span, it->second - origin_, now_ - origin_});
    open_.erase(it);
  }

 private:
  struct Op {
    TraceLane kind;
    GhostGroup group;
    int after;
    std::string name;
    double seconds;
    double end = std::numeric_limits<double>::infinity();  // not yet run
  };

  void compute(double t, OpClass cls) {
    now_ += t;
    sim_.compute_s += t;
    sim_.op_class_s[size_t(cls)] += t;
  }
  // Async: on its group's queue, once the queue is free and `after` is done.
  void schedule(Op& op) {
    double& free = free_[size_t(op.group)];
    const double start = std::max({now_, free, op.after >= 0 ? ops_[size_t(op.after)].end : 0.0});
    op.end = free = start + op.seconds;
    record(op, start);
  }
  // Polled: every operation not yet run runs now, in issue order, on the compute thread, which
  // does their copies and reductions (the ranks reach the same boundary together).
  void poll() {
    for (; polled_ < ops_.size(); ++polled_) {
      Op& op = ops_[polled_];
      const double start = now_;
      now_ += op.seconds;
      sim_.exposed_s += op.seconds;
      op.end = now_;
      record(op, start);
    }
  }
  void record(const Op& op, double start) {
    if (op.seconds > 0) sim_.spans.push_back({op.kind, op.name, start - origin_, op.end - origin_});
  }
  // comm/communicator.cpp's count, in its integer arithmetic: the buffer divides by n, except
  // an all-reduce's.
  static uint64_t bytes_sent(TraceLane kind, int n, double bytes) {
    if (n <= 1) return 0;
    const auto b = static_cast<uint64_t>(bytes), ranks = static_cast<uint64_t>(n);
    return kind == TraceLane::all_reduce ? 2 * (ranks - 1) * b / ranks : (ranks - 1) * (b / ranks);
  }

  const Cluster& c_;
  GhostGroups groups_;
  std::array<GroupShape, 4> shapes_{};
  std::array<double, 4> free_{};  // async: when each group's queue is free
  std::vector<Op> ops_;           // every collective issued, by id
  size_t polled_ = 0;             // polled: the first not yet run
  double now_ = 0, origin_ = 0;
  Simulation sim_;
  std::map<std::string, double> open_;  // compute spans begun, by name
};

std::string sharding_name(int stage, const GhostGroups& g) {
  const std::string groups = std::to_string(g.replicas()) + " groups of " + std::to_string(g.shard);
  switch (stage) {
    case 0: return "NO_SHARD (stage 0)";
    case 1: return "stage 1 (optimizer states sharded)";
    case 2: return g.hybrid ? "_HYBRID_SHARD_ZERO2 (stage 2 within " + groups + ")" : "SHARD_GRAD_OP (stage 2)";
    default:
      if (g.hybrid) return "HYBRID_SHARD (stage 3 within " + groups + ")";
      if (g.secondary > 1) return "FULL_SHARD with hpZ (secondary shards within groups of " + std::to_string(g.secondary) + ")";
      return "FULL_SHARD (stage 3)";
  }
}

std::string seconds(double s) {
  char b[32];
  if (s >= 1) std::snprintf(b, sizeof b, "%.3f s", s);
  else if (s >= 1e-3) std::snprintf(b, sizeof b, "%.2f ms", s * 1e3);
  else std::snprintf(b, sizeof b, "%.1f us", s * 1e6);
  return b;
}

}  // namespace

Simulation simulate_step(const Config& cfg, int world, const Cluster& cluster) {
  const std::unique_ptr<Model> model = ghost_model(cfg, world);
  SimClock clock(cluster);
  GhostStep step(cfg, *model, cfg.zero.stage, world, cluster.devices_per_node, &clock);
  clock.set_groups(step.groups());
  step.run();  // records the schedule
  clock.step_overhead();
  clock.restart();
  step.ledger().reset_peaks();
  step.run();
  clock.step_overhead();
  Simulation s = clock.result();
  s.world = world;
  s.stage = cfg.zero.stage;
  s.sharding = sharding_name(cfg.zero.stage, step.groups());
  s.step_s = clock.elapsed();
  s.peak_bytes = step.ledger().snapshot().total_peak;
  s.tokens_per_step = static_cast<double>(cfg.micro_batch) * cfg.data.seq_len * cfg.grad_accum;
  s.model_flops = model->flops_per_token(cfg.data.seq_len) * s.tokens_per_step;
  s.tokens_per_s_per_device = s.step_s > 0 ? s.tokens_per_step / s.step_s : 0;
  s.mfu = s.step_s > 0 ? s.model_flops / s.step_s / cluster.flops : 0;
  s.hfu = s.step_s > 0 ? s.executed_flops / s.step_s / cluster.flops : 0;
  std::sort(s.spans.begin(), s.spans.end(), [](const SimulatedSpan& a, const SimulatedSpan& b) { return a.begin < b.begin; });
  return s;
}

std::string format_simulation(const Config& cfg, const Cluster& cluster, const Simulation& s) {
  const int d = cluster.devices_per_node;
  char b[2048];
  std::string out;
  std::snprintf(b, sizeof b,
                "model %s; micro-batch %d x seq_len %d, accumulation %d; %s\n"
                "%d ranks on %d node(s) of %d (%s); %s\n\n",
                cfg.model.arch.c_str(), cfg.micro_batch, cfg.data.seq_len, cfg.grad_accum, cfg.precision.dtype.c_str(),
                s.world, (s.world + d - 1) / d, d, cluster.name.c_str(), s.sharding.c_str());
  out += b;
  std::snprintf(b, sizeof b,
                "step              %s\n"
                "  compute         %s (gemm %s, attention %s, memory-bound %s)\n"
                "  exposed comm    %s (%.1f%% of the step)\n"
                "communication     all_gather %s, reduce_scatter %s, all_reduce %s (busy time of the queues)\n"
                "sent per rank     %s within groups, %s across\n"
                "tokens/s/device   %.0f\n"
                "MFU               %.1f%% (%.3g model flops a step per rank, no recompute)%s\n"
                "HFU               %.1f%% (%.3g flops the step's ops execute per rank, recompute included)\n"
                "memory per rank   %s (peak)\n",
                seconds(s.step_s).c_str(), seconds(s.compute_s).c_str(), seconds(s.op_class_s[0]).c_str(),
                seconds(s.op_class_s[1]).c_str(), seconds(s.op_class_s[2]).c_str(), seconds(s.exposed_s).c_str(),
                s.step_s > 0 ? 100.0 * s.exposed_s / s.step_s : 0.0, seconds(s.comm_s[0]).c_str(),
                seconds(s.comm_s[1]).c_str(), seconds(s.comm_s[2]).c_str(), human_bytes(s.comm_bytes_intra).c_str(),
                human_bytes(s.comm_bytes_inter).c_str(), s.tokens_per_s_per_device, 100.0 * s.mfu, s.model_flops,
                s.mfu > 1 ? "\n                  above 100%: the formula counts 6 flops a token for every parameter, lookups and"
                            "\n                  norms included, which this small a model's ops do not all execute; HFU is what they do"
                          : "",
                100.0 * s.hfu, s.executed_flops, human_bytes(s.peak_bytes).c_str());
  out += b;
  return out;
}

std::string simulation_json(const Simulation& s) {
  return nlohmann::json{{"world_size", s.world},
                        {"stage", s.stage},
                        {"sharding", s.sharding},
                        {"step_s", s.step_s},
                        {"compute_s", s.compute_s},
                        {"exposed_comm_s", s.exposed_s},
                        {"comm_bytes_intra", s.comm_bytes_intra},
                        {"comm_bytes_inter", s.comm_bytes_inter},
                        {"comm_s", {{"all_gather", s.comm_s[0]}, {"reduce_scatter", s.comm_s[1]}, {"all_reduce", s.comm_s[2]}}},
                        {"compute_by_class_s",
                         {{"gemm", s.op_class_s[0]}, {"attention", s.op_class_s[1]}, {"memory", s.op_class_s[2]}}},
                        {"flat_work_s", s.flat_work_s},
                        {"tokens_per_step", s.tokens_per_step},
                        {"model_flops", s.model_flops},
                        {"tokens_per_s_per_device", s.tokens_per_s_per_device},
                        {"mfu", s.mfu},
                        {"executed_flops", s.executed_flops},
                        {"hfu", s.hfu},
                        {"peak_bytes", s.peak_bytes}}
             .dump() +
         "\n";
}

void write_simulated_trace(const Simulation& s, const std::string& path) {
  Trace trace(0);
  const Trace::clock::time_point origin{};
  auto at = [&](double t) { return origin + std::chrono::nanoseconds(static_cast<int64_t>(std::llround(t * 1e9))); };
  for (const SimulatedSpan& x : s.spans) trace.span(x.lane, x.name, at(x.begin), at(x.end));
  const std::unique_ptr<Communicator> self = make_self_communicator();
  trace.write(*self, path);
}

}  // namespace zt
