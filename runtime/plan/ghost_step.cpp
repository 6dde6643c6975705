#include "runtime/plan/ghost_step.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "offload/swap_store.hpp"
#include "runtime/plan/estimate_activations.hpp"
#include "runtime/plan/ghost_comm.hpp"
#include "runtime/train/trainer.hpp"
#include "runtime/zero/groups.hpp"
#include "runtime/zero/optimizer_offload.hpp"
#include "runtime/zero/param_offload.hpp"
#include "runtime/zero/scheduler.hpp"
#include "runtime/zero/sharded_unit.hpp"
#include "runtime/zero/unit_group.hpp"
#include "tensor/meta_allocator.hpp"

namespace zt {

namespace {

// A group of `n` consecutive ranks lies on one host (shares a host's memory, as MPI's
// MPI_COMM_TYPE_SHARED finds it) where the hosts' `ranks_per_host` consecutive ranks hold it.
bool on_one_host(int n, int ranks_per_host) { return n > 1 && n <= ranks_per_host && ranks_per_host % n == 0; }

}  // namespace

std::unique_ptr<Model> ghost_model(const Config& cfg, int world_size) {
  std::string why;  // built by appending: GCC 12 -O3 warns (-Wrestrict) on "literal" + std::string
  if (world_size < 1) {
    why = "the world size must be >= 1, got ";
    throw ConfigError(why + std::to_string(world_size));
  }
  check_batch_size(cfg, world_size);
  const ModelDims dims = resolve_dims(cfg);
  if (cfg.data.seq_len > dims.max_seq_len) {
    why = "config: data.seq_len: ";
    why += std::to_string(cfg.data.seq_len) + " exceeds the model's max_seq_len " + std::to_string(dims.max_seq_len);
    throw ConfigError(why);
  }
  if (dims.n_embd % dims.n_head != 0) {
    why = "config: model.n_embd: ";
    why += std::to_string(dims.n_embd) + " is not divisible by model.n_head " + std::to_string(dims.n_head);
    throw ConfigError(why);
  }
  return make_run_model(cfg, dims, cfg.model.wte_units);
}

GhostGroups ghost_groups(const ZeroConfig& z, int world, int ranks_per_host) {
  GhostGroups g;
  g.world = g.shard = world;
  g.ranks_per_host = ranks_per_host <= 0 ? world : ranks_per_host;
  g.hybrid = z.hybrid;
  if (z.hybrid) g.shard = shard_group_ranks(z, world, g.ranks_per_host);
  else if (z.hpz_partition_size > 1) g.secondary = shard_group_ranks(z, world, g.ranks_per_host);
  return g;
}

bool GhostGroups::inter(GhostGroup g) const {
  // runtime/zero/groups.cpp's rule; a run's ranks fill hosts in order.
  const int group = hybrid ? shard : secondary > 1 ? secondary : world;
  const bool world_spans = group < world || (!hybrid && secondary <= 1 && std::min(world, ranks_per_host) != world);
  switch (g) {
    case GhostGroup::replicas: return true;
    case GhostGroup::secondary: return false;
    case GhostGroup::shard: return shard == world && world_spans;
    default: return world_spans;
  }
}

struct GhostStep::State {
  State(const Config& c, const Model& model, int stage, int world, int ranks_per_host, GhostClock* clk)
      : cfg(c), z(c.zero), clock(clk) {
    z.stage = stage;
    // [Note: shard groups]: hybrid sharding applies from stage 2, hpZ at stage 3.
    z.hybrid = z.hybrid && stage >= 2;
    if (stage != 3) z.hpz_partition_size = 1;
    groups = ghost_groups(z, world, ranks_per_host);
    // Offload applies where the run allows it: the optimizer's from stage 1, the parameters' at 3.
    if (stage == 0) z.offload_optimizer.device = "none";
    if (stage != 3) z.offload_param.device = "none";
    make_groups();
    const DType wire = dtype_from_name(cfg.precision.dtype);
    // [Note: compute in 16 bits]: a CUDA run in bf16 computes in it, with no f32 copies, and its
    // units' memory is not the host's.
    const bool narrow = cfg.train.device == "cuda" && wire == DType::bf16;
    UnitOptions options;
    options.wire = wire;
    options.offload_states = z.offload_optimizer.enabled();
    options.offload_param = z.offload_param.enabled();
    options.memory = &meta;
    options.layout = UnitOptions::Layout{narrow, narrow};
    // The engine's units and offloads (ZeroEngine's constructor), on the meta device.
    units.reserve(model.num_units());
    for (const UnitLayout& lay : model.layout()) {
      units.push_back(make_unit(lay, z, *shard_groups, cfg.optimizer, options));
      for (const Tensor& t : units.back().buffers()) (*buffer_names)[t.storage().get()] = lay.name;
    }
    if (options.offload_states)
      optimizer_offload = std::make_unique<OptimizerOffload>(
          units, z, make_meta_store(meta, z.offload_optimizer.device == "cpu", MemCategory::optimizer), nullptr, &meta);
    if (options.offload_param)
      param_offload = std::make_unique<ParamOffload>(
          units, z.offload_param, make_meta_store(meta, z.offload_param.device == "cpu", MemCategory::parameters));
    for (int u = 0; u < static_cast<int>(units.size()); ++u)
      units[size_t(u)].attach_offloads(optimizer_offload.get(), param_offload.get(), u);
    std::vector<ScheduledUnit*> all;
    for (ShardedUnit& x : units) all.push_back(&x);
    sched = std::make_unique<ZeroScheduler>(schedule_units(model.layout(), all, unit_groups), z);
    sched->set_background([this] {
      if (optimizer_offload) optimizer_offload->poll();
    });
    hooks = sched->hooks();
    if (clock) {
      hooks = timed(hooks, model);
      meta.on_zero([this](size_t bytes) {
        if (in_engine) clock->flat_work("zero", static_cast<double>(bytes));
      });
    }
    pass = std::make_unique<MetaPass>(model, meta, cfg.micro_batch, cfg.data.seq_len, narrow ? wire : DType::f32);
  }

  // The run's communicators ([Note: shard groups]) as ghosts ([Note: the ghost communicator]):
  // the world, and with hybrid sharding the shard group and the replicas, with hpZ the secondary
  // group. A plain run's world is its shard group (GhostGroup::shard, as the clock names it).
  void make_groups() {
    const int rph = groups.ranks_per_host;
    auto ghost = [&](int n, bool one_host, GhostGroup g) {
      auto c = std::make_unique<GhostCommunicator>(n, one_host, g, meta, clock);
      c->set_names(buffer_names);
      return c;
    };
    world_comm = ghost(groups.world, on_one_host(groups.world, rph), GhostGroup::shard);
    std::unique_ptr<Communicator> shard, replicas, secondary;
    if (groups.shard < groups.world) {
      shard = ghost(groups.shard, on_one_host(groups.shard, rph), GhostGroup::shard);
      // The ranks at one place in every group: on one host only where the whole world is.
      replicas = ghost(groups.replicas(), groups.world <= rph, GhostGroup::replicas);
    }
    if (groups.secondary > 1) secondary = ghost(groups.secondary, on_one_host(groups.secondary, rph), GhostGroup::secondary);
    const int group = groups.shard < groups.world ? groups.shard : groups.secondary > 1 ? groups.secondary : groups.world;
    shard_groups = std::make_unique<ShardGroups>(*world_comm, std::move(shard), std::move(replicas), std::move(secondary),
                                                 world_is_inter_group(z, groups.world, std::min(groups.world, rph), group));
  }

  // The scheduler's hooks with the compute lane's spans inside them: a unit's compute begins
  // once its pre-hook (the gather's wait) returned and ends before its post-hook runs.
  UnitHooks timed(const UnitHooks& h, const Model& model) {
    for (const UnitLayout& lay : model.layout()) names.push_back(lay.name);
    auto span = [this](const char* what, int u) {
      return std::string(what) + " " + (u >= 0 && u < static_cast<int>(names.size()) ? names[size_t(u)] : std::to_string(u));
    };
    UnitHooks t;
    t.pre_forward = [this, h, span](int u) {
      engine([&] { h.pre_forward(u); });
      clock->unit_span(span(in_backward ? "recompute" : "forward", u), true);
    };
    t.post_forward = [this, h, span](int u) {
      clock->unit_span(span(in_backward ? "recompute" : "forward", u), false);
      engine([&] { h.post_forward(u); });
    };
    t.pre_backward = [this, h, span](int u) {
      in_backward = true;
      engine([&] { h.pre_backward(u); });
      clock->unit_span(span("backward", u), true);
    };
    t.post_backward = [this, h, span](int u) {
      clock->unit_span(span("backward", u), false);
      engine([&] { h.post_backward(u); });
    };
    return t;
  }

  // Runs `f`, the engine's own code: its zeroing of flat buffers is priced as the engine's work
  // (the model's zeroing, of each activation gradient on first use, is the ops' and not priced).
  template <class F>
  void engine(F&& f) {
    const bool was = in_engine;
    in_engine = true;
    f();
    in_engine = was;
  }

  // The step's one-element all-reduces (Trainer::step): fp16's overflow flag, the gradient norm
  // (within the shard group, then its maximum over the world, which every replica agrees on) and
  // the loss, each waited for.
  void small_reductions() {
    const int world = groups.world;
    const size_t flag = cfg.precision.dtype == "f16" && world > 1 ? sizeof(int32_t) : 0;
    const size_t norm = z.stage > 0 && world > 1 ? sizeof(float) : 0, loss = world > 1 ? sizeof(float) : 0;
    // The MPI progress thread may still hold one (its finished operation captured it) when the
    // next is allocated.
    MemAccounting& mem = meta.accounting();
    for (size_t b : {flag, norm, loss}) mem.add(MemCategory::communication, b);
    mem.sub(MemCategory::communication, flag + norm + loss);
    if (!clock) return;
    auto reduce = [&](GhostGroup g, size_t bytes, const char* what) {
      if (bytes) clock->wait(clock->issue(TraceLane::all_reduce, g, static_cast<double>(bytes), -1, what));
    };
    reduce(GhostGroup::world, flag, "all_reduce overflow flag");
    reduce(GhostGroup::shard, norm, "all_reduce gradient norm");
    if (groups.replicas() > 1) reduce(GhostGroup::world, norm, "all_reduce gradient norm over the world");
    reduce(GhostGroup::world, loss, "all_reduce loss");
  }

  void run() {
    std::unique_ptr<OpCostScope> costs;
    if (clock) costs = std::make_unique<OpCostScope>(clock);
    engine([&] {
      for (ShardedUnit& x : units) x.begin_step();
    });
    for (int micro = 0; micro < cfg.grad_accum; ++micro) {
      sched->begin_pass(z.stage >= 2 || micro == cfg.grad_accum - 1);
      in_backward = false;
      pass->run(hooks, [&] { engine([&] { sched->end_pass(); }); });
    }
    // ZeroEngine::grad_norm's read of every gradient shard.
    std::vector<Tensor> shards;
    for (const ShardedUnit& x : units)
      if (!x.frozen()) shards.push_back(x.grad_shard());
    backend(meta.device()).sum_squares(shards);
    small_reductions();
    engine([&] { update(); });
  }

  // ZeroEngine::update: AdamW, then the kept parameters gathered again; or, offloaded to NVMe with
  // overlap_step, behind the next forward, each unit's part done where its gather starts ([Note:
  // update behind the next forward]; the estimate's bound, as late as the rules allow).
  void update() {
    constexpr float lr = 1e-3f, grad_scale = 1.0f;
    constexpr int t = 1;
    if (optimizer_offload) {
      // The previous update's last writes, which a run's I/O has completed by now.
      optimizer_offload->finish();
      if (optimizer_offload->can_defer() && z.offload_optimizer.overlap_step) return optimizer_offload->begin(lr, grad_scale, t);
      optimizer_offload->update(lr, grad_scale, t);
    } else {
      for (ShardedUnit& x : units) x.update(lr, grad_scale, t);
    }
    if (param_offload) param_offload->flush();
    sched->gather_kept();
  }

  const Config& cfg;
  ZeroConfig z;
  GhostClock* clock;
  GhostGroups groups;
  MetaAllocator meta;  // the rank's ledger: the units' buffers, the communicators' and the activations
  // Who each collective's buffer belongs to, for the clock's names.
  std::shared_ptr<GhostCommunicator::Names> buffer_names = std::make_shared<GhostCommunicator::Names>();
  std::unique_ptr<Communicator> world_comm;
  std::unique_ptr<ShardGroups> shard_groups;
  std::vector<ShardedUnit> units;
  std::unique_ptr<OptimizerOffload> optimizer_offload;
  std::unique_ptr<ParamOffload> param_offload;
  std::vector<std::unique_ptr<UnitGroup>> unit_groups;  // a unit with its adapter units, as the engine drives them
  std::unique_ptr<ZeroScheduler> sched;
  UnitHooks hooks;
  std::vector<std::string> names;
  bool in_backward = false;
  bool in_engine = false;  // the engine's code runs (engine())
  std::unique_ptr<MetaPass> pass;
};

GhostStep::GhostStep(const Config& cfg, const Model& model, int stage, int world, int ranks_per_host, GhostClock* clock)
    : s_(std::make_unique<State>(cfg, model, stage, world, ranks_per_host, clock)) {}
GhostStep::~GhostStep() = default;
void GhostStep::run() { s_->run(); }
MemAccounting& GhostStep::ledger() { return s_->meta.accounting(); }
const GhostGroups& GhostStep::groups() const { return s_->groups; }

}  // namespace zt
