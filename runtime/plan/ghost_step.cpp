#include "runtime/plan/ghost_step.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "offload/swap_store.hpp"
#include "runtime/plan/estimate_activations.hpp"
#include "runtime/train/trainer.hpp"
#include "runtime/zero/buffer_plan.hpp"
#include "runtime/zero/groups.hpp"
#include "runtime/zero/scheduler.hpp"
#include "runtime/zero/shard.hpp"
#include "runtime/zero/unit_group.hpp"
#include "tensor/meta_allocator.hpp"

namespace zt {

namespace {

size_t f32_bytes(int64_t elements) { return static_cast<size_t>(elements) * sizeof(float); }

// ---- The ZeRO engine's buffers, driven by its own scheduler -----------------------------------

// The communicator's f32 staging buffers for 16-bit reductions and large in-place f32 all-reduces
// (comm/mpi_communicator.cpp's StagingPool): handed out first fit, taken back when the operation
// completes, never freed.
class GhostStaging {
 public:
  explicit GhostStaging(MemAccounting& mem) : mem_(mem) {}
  // Returns the buffer's id, to hand back to put().
  size_t get(int64_t elements) {
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (sizes_[*it] >= elements) {
        const size_t id = *it;
        free_.erase(it);
        return id;
      }
    mem_.add(MemCategory::communication, f32_bytes(elements));
    sizes_.push_back(elements);
    return sizes_.size() - 1;
  }
  void put(size_t id) { free_.push_back(id); }

 private:
  MemAccounting& mem_;
  std::vector<int64_t> sizes_;  // by id
  std::vector<size_t> free_;    // ids, in the order they came back
};

// What a rank's units share: the ledger, the communicator's reduce-scatter ring buffer (its
// length in f32 elements) and its staging pool.
struct GhostRank {
  explicit GhostRank(MemAccounting& m) : mem(m), staging(m) {}
  MemAccounting& mem;
  int64_t ring = 0;
  GhostStaging staging;
};

// ParamOffload's rules ([Note: parameter offload]) on the ledger: when a unit's shard is here.
class GhostParamOffload {
 public:
  GhostParamOffload(const OffloadConfig& cfg, MemAccounting& mem) : cfg_(cfg), mem_(mem) {}
  // A unit's shard of `bytes` (`elements` long); returns its id. Device cpu keeps every shard in
  // host memory (whole pages); nvme keeps the first within max_in_cpu elements here for good.
  int add(size_t bytes, int64_t elements) {
    bytes_.push_back(bytes);
    here_.push_back(0);
    writing_.push_back(0);
    const bool keep = cfg_.device == "nvme" && cached_ + elements <= cfg_.max_in_cpu;
    keep_.push_back(keep);
    if (keep) {
      cached_ += elements;
      bring(static_cast<int>(bytes_.size()) - 1);
    }
    if (cfg_.device == "cpu") mem_.add(MemCategory::parameters, SwapStore::buffer_bytes(bytes));
    return static_cast<int>(bytes_.size()) - 1;
  }
  void fetch(int u) { bring(u); }
  void ready(int u) {
    bring(u);
    writing_[u] = 0;
  }
  void done_with(int u) { evict(u); }
  void make_room(int u) { ready(u); }
  void store(int u) {
    ready(u);
    if (cfg_.device != "nvme") return evict(u);
    writing_[u] = 1;
    queue_.push_back(u);
    while (static_cast<int>(queue_.size()) > cfg_.buffer_count) retire();
  }
  void flush() {
    while (!queue_.empty()) retire();
  }

 private:
  void bring(int u) {
    if (here_[u]) return;
    mem_.add(MemCategory::parameters, bytes_[u]);
    here_[u] = 1;
  }
  void evict(int u) {
    if (!here_[u] || keep_[u] || writing_[u]) return;
    mem_.sub(MemCategory::parameters, bytes_[u]);
    here_[u] = 0;
  }
  void retire() {
    const int u = queue_.front();
    queue_.pop_front();
    if (!writing_[u]) return;
    writing_[u] = 0;
    evict(u);
  }

  OffloadConfig cfg_;
  MemAccounting& mem_;
  std::vector<size_t> bytes_;
  std::vector<char> here_, writing_, keep_;
  std::deque<int> queue_;
  int64_t cached_ = 0;
};


// One rank's ShardedUnit (runtime/zero/sharded_unit.hpp) without its buffers: the same buffer plan
// (runtime/zero/buffer_plan.hpp), each buffer charged to the ledger where the unit allocates or
// frees it, and the real ZeroScheduler decides when. Without a clock a collective completes where
// the scheduler waits for it, or (a gather) where it first tests it, and a reduction is only
// waited for where reduce_bucket_size forces it, which gives the bound the rules allow for the
// full gradients of stages 2-3. With a clock each collective is issued on its group's queue, as
// ShardedUnit issues it (an hpZ gather from fresh secondary shards within the secondary group; a
// hybrid reduction's slice over the replicas once the reduction within the group is done), and
// completes at the time the clock gives it; the casts the CPU's widening needs and AdamW over
// the shard are priced as flat-buffer work.
class GhostUnit final : public ScheduledUnit {
 public:
  // `wire`: f32, or the 16-bit type of [Note: mixed precision]; `narrow`: compute in it ([Note:
  // compute in 16 bits]), else in f32.
  // `poff`: the parameter offload, null without one. `groups`: the ranks of the run, of a shard
  // group and of an hpZ group ([Note: shard groups]). `clock`: null for memory alone.
  GhostUnit(const UnitLayout& lay, const ZeroConfig& z, const GhostGroups& groups, DType wire, bool narrow,
            GhostRank& rank, GhostParamOffload* poff, GhostClock* clock)
      : name_(lay.name),
        geo_(shard_geometry(lay.numel, groups.shard, 0)),
        stage_(z.stage),
        groups_(groups),
        shm_(groups.shard_on_one_host()),
        frozen_(lay.frozen()),
        persistent_(keeps_full_params(lay.numel, frozen_, z)),
        offloaded_optimizer_(z.offload_optimizer.enabled()),
        rank_(rank),
        mem_(rank.mem),
        clock_(clock) {
    BufferPlanInput in;
    in.geo = geo_, in.stage = stage_, in.persistent = persistent_, in.wire = wire;
    in.offload_states = z.offload_optimizer.enabled(), in.offload_param = poff != nullptr;
    in.frozen = frozen_, in.narrow = narrow, in.on_device = narrow;
    if (groups.secondary > 1 && stage_ == 3 && !persistent_) in.secondary_shard = geo_.padded() / groups.secondary;
    plan_ = plan_unit_buffers(in);
    // What a rank holds from construction on: every kept buffer. The shard a stage-3 unit gathers
    // from may be the parameter offload's instead.
    for (const BufferSpec& b : plan_.buffers)
      if (b.life == BufferLife::kept) mem_.add(b.category, b.bytes());
    if (plan_.param_offloaded) {
      poff_ = poff;
      index_ = poff->add(plan_[plan_.gather_source()].bytes(), plan_[plan_.gather_source()].numel);
    }
    state_ = persistent_ ? ParamState::gathered : ParamState::sharded;
    grads_ = plan_[UnitBuffer::full_grads].life == BufferLife::kept;
  }

  const std::string& name() const override { return name_; }
  int64_t numel() const override { return geo_.numel; }
  bool persistent() const override { return persistent_; }
  ParamState state() const override { return state_; }

  void start_gather() override {
    if (pending_) finish_update();
    if (poff_) poff_->ready(index_);
    if (!persistent_) charge(UnitBuffer::full_params);
    charge(UnitBuffer::wire_params);
    state_ = ParamState::gathering;
    if (!clock_) return;
    const double bytes = static_cast<double>(geo_.padded()) * dtype_size(plan_[plan_.gather_source()].dtype);
    const bool within = plan_[UnitBuffer::secondary].exists() && secondary_fresh_;
    gather_op_ = clock_->issue(TraceLane::all_gather, within ? GhostGroup::secondary : GhostGroup::shard, bytes, -1,
                               "all_gather " + name_);
    secondary_fresh_ = plan_[UnitBuffer::secondary].exists();
  }
  bool gather_done() override {
    if (state_ == ParamState::gathering && (!clock_ || clock_->done(gather_op_))) wait_gather();
    return state_ == ParamState::gathered;
  }
  void wait_gather() override {
    if (state_ != ParamState::gathering) return;
    if (clock_) {
      clock_->wait(gather_op_);
      if (plan_[UnitBuffer::wire_params].exists())  // compute widens the 16-bit parameters
        clock_->flat_work("cast", static_cast<double>(plan_[UnitBuffer::wire_params].bytes() + plan_[UnitBuffer::full_params].bytes()));
    }
    drop(UnitBuffer::wire_params);
    if (poff_) poff_->done_with(index_);
    state_ = ParamState::gathered;
  }
  void prefetch_shard() override {
    if (poff_) poff_->fetch(index_);
  }
  void release() override {
    if (persistent_ || state_ == ParamState::sharded) return;
    drop(UnitBuffer::full_params);
    state_ = ParamState::sharded;
  }
  // ShardedUnit::update's effects: the shard is here for it and written back after it, and the
  // kept full parameters are stale (stages 1-3). `deferred` ([Note: update behind the next
  // forward]): the parameters are stale now, the rest happens at the unit's next gather.
  void updated(bool deferred) {
    if (frozen_) return;  // no update, never stale
    if (stage_ > 0 && state_ == ParamState::gathered) state_ = ParamState::sharded;
    secondary_fresh_ = false;
    // AdamW over the shard (the whole unit at stage 0), on the device unless the optimizer is
    // offloaded: master, m and v read and written, the gradients read, the 16-bit shard written.
    if (clock_ && !offloaded_optimizer_) {
      const double M = static_cast<double>(stage_ == 0 ? geo_.padded() : geo_.shard);
      clock_->flat_work("adamw", M * (6 * sizeof(float) + sizeof(float)) +
                                     static_cast<double>(plan_[UnitBuffer::shard16].bytes()));
    }
    if (deferred) pending_ = true;
    else finish_update();
  }

  // The step's first touch of the gradients (ShardedUnit::begin_step): the full gradients zeroed
  // below stage 2, the gradient shard from stage 2 on.
  void begin_step() {
    if (frozen_ || !clock_) return;
    clock_->flat_work("zero", static_cast<double>(plan_[stage_ < 2 ? UnitBuffer::full_grads : UnitBuffer::grad_shard].bytes()));
  }
  // The gradient norm's read of what AdamW will read (ZeroEngine::grad_norm).
  void norm() {
    if (frozen_ || !clock_) return;
    clock_->flat_work("norm", static_cast<double>(plan_[UnitBuffer::grad_shard].bytes()));
  }

  void prepare_grads() override {
    if (grads_) return;
    charge(UnitBuffer::full_grads);
    grads_ = true;
    // Stages 2-3 bring them back zeroed for each backward.
    if (clock_ && !frozen_) clock_->flat_work("zero", static_cast<double>(plan_[UnitBuffer::full_grads].bytes()));
  }
  void start_reduce(bool scatter) override {
    if (frozen_) return;  // nothing to average
    const int64_t P = geo_.padded(), S = geo_.shard;
    const bool wire = plan_[UnitBuffer::wire_grads].exists();
    if (groups_.world == 1) {
      // One rank: done at once; in 16 bits the gradients round through a temporary 16-bit copy.
      charge(UnitBuffer::wire_grads);
      drop(UnitBuffer::wire_grads);
      finish_reduce();
      return;
    }
    const bool all_reduce = stage_ == 0 || !scatter;
    if (wire) charge(UnitBuffer::wire_grads);  // the 16-bit copy of the gradients
    reducing_ = true;
    if (clock_) issue_reduction(all_reduce);
    // A shard group within one host reduces through its shared-memory channel, in buffers of its
    // own outside the ledger ([Note: shared-memory collectives] in comm/shm_channel.hpp).
    if (shm_) return;
    // Across hosts, MPI's (kLargeAllReduceBytes in comm/mpi_communicator.hpp): a large all-reduce
    // over 2-3 ranks runs as a ring in an f32 copy of the buffer (P divides into the group's
    // chunks); otherwise 16 bits stage through f32, in and out of an all-reduce, or in and this
    // rank's slice of a reduce-scatter, and a large f32 all-reduce (in place here) stages its input.
    const bool ring = all_reduce && ring_all_reduce(groups_.shard, P);
    if (ring) staged_ = rank_.staging.get(P);
    else if (wire) staged_ = rank_.staging.get(all_reduce ? 2 * P : P + S);
    else if (all_reduce && f32_bytes(P) >= kLargeAllReduceBytes) staged_ = rank_.staging.get(P);
    // comm/mpi_communicator.cpp: a reduce-scatter (f32, or the staged f32 of 16 bits) and a large
    // all-reduce run as a ring through a buffer of twice the chunk (the shard), kept between
    // operations and grown (new before old is freed) for a longer one. Small all-reduces run in
    // MPI's own buffers.
    if ((!all_reduce || ring) && 2 * S > rank_.ring) {
      mem_.add(MemCategory::communication, f32_bytes(2 * S));
      mem_.sub(MemCategory::communication, f32_bytes(rank_.ring));
      rank_.ring = 2 * S;
    }
  }
  bool reduce_done() override {
    if (reducing_ && clock_ && clock_->done(reduce_op_)) finish_reduce();
    return !reducing_;
  }
  void wait_reduce() override {
    if (!reducing_) return;
    if (clock_) clock_->wait(reduce_op_);
    finish_reduce();
  }
  bool reducing() const override { return reducing_; }

 private:
  // A buffer the plan does not have is 0 bytes.
  void charge(UnitBuffer b) { mem_.add(plan_[b].category, plan_[b].bytes()); }
  void drop(UnitBuffer b) { mem_.sub(plan_[b].category, plan_[b].bytes()); }
  void finish_update() {
    pending_ = false;
    if (!poff_) return;
    poff_->make_room(index_);
    poff_->store(index_);
  }

  // reduce_grads (runtime/zero/collectives.cpp) on the clock: within the shard group, then the
  // slice over the replicas. In 16 bits the gradients are cast to the wire first.
  void issue_reduction(bool all_reduce) {
    const double element = dtype_size(plan_[UnitBuffer::wire_grads].exists() ? plan_[UnitBuffer::wire_grads].dtype
                                                                              : plan_[UnitBuffer::full_grads].dtype);
    if (plan_[UnitBuffer::wire_grads].exists())
      clock_->flat_work("cast", static_cast<double>(plan_[UnitBuffer::wire_grads].bytes() + plan_[UnitBuffer::full_grads].bytes()));
    const double P = static_cast<double>(geo_.padded()), S = static_cast<double>(geo_.shard);
    reduce_op_ = clock_->issue(all_reduce ? TraceLane::all_reduce : TraceLane::reduce_scatter, GhostGroup::shard,
                               P * element, -1, (all_reduce ? "all_reduce " : "reduce_scatter ") + name_);
    if (groups_.replicas() > 1)
      reduce_op_ = clock_->issue(TraceLane::all_reduce, GhostGroup::replicas, S * element, reduce_op_,
                                 "all_reduce " + name_ + " over replicas");
  }

  void finish_reduce() {
    if (staged_) rank_.staging.put(*staged_);
    staged_.reset();
    if (reducing_ && plan_[UnitBuffer::wire_grads].exists()) drop(UnitBuffer::wire_grads);
    // Stages 2-3 add the reduced slice into the f32 gradient shard: read both, write one.
    if (clock_ && reducing_ && stage_ >= 2) clock_->flat_work("accumulate", 3.0 * f32_bytes(geo_.shard));
    reducing_ = false;
    if (plan_[UnitBuffer::full_grads].life == BufferLife::kept) return;
    drop(UnitBuffer::full_grads);
    grads_ = false;
  }

  std::string name_;
  ShardGeometry geo_;
  int stage_;
  GhostGroups groups_;
  bool shm_;  // the shard group lies on one host
  bool frozen_;
  bool persistent_;
  bool offloaded_optimizer_;
  BufferPlan plan_;
  GhostRank& rank_;
  MemAccounting& mem_;
  GhostClock* clock_;
  ParamState state_;
  bool grads_ = false, reducing_ = false;
  std::optional<size_t> staged_;  // the staging buffer of the reduction in flight, if it has one
  GhostParamOffload* poff_ = nullptr;
  int index_ = -1;
  bool pending_ = false;  // an update behind the next forward
  bool secondary_fresh_ = false;  // hpZ: the secondary shard holds the parameters as last gathered
  int gather_op_ = -1, reduce_op_ = -1;  // with a clock: the collectives in flight
};

// What an OptimizerOffload holds ([Note: optimizer offload]): device cpu, every sub-group's
// record in host memory; nvme, buffer_count buffers of the largest record (fewer if there are
// fewer sub-groups). Whole pages, as PinnedBuffer allocates them.
size_t optimizer_offload_bytes(const Model& model, const ZeroConfig& z, int shard_ranks, bool own_master) {
  size_t records = 0, largest = 0, count = 0;
  for (const UnitLayout& lay : model.layout()) {
    if (lay.frozen()) continue;  // no optimizer states
    const ShardGeometry g = shard_geometry(lay.numel, shard_ranks, 0);
    const int64_t M = z.stage == 0 ? g.padded() : g.shard;
    for (int64_t b = 0; b < M; b += z.sub_group_size) {
      const size_t bytes = SwapStore::buffer_bytes(f32_bytes(std::min(M, b + z.sub_group_size) - b) * (own_master ? 3 : 2));
      records += bytes;
      largest = std::max(largest, bytes);
      ++count;
    }
  }
  if (z.offload_optimizer.device == "cpu") return records;
  return std::min(count, static_cast<size_t>(z.offload_optimizer.buffer_count)) * largest;
}
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
      : cfg(c), z(c.zero), clock(clk), rank(meta.accounting()) {
    z.stage = stage;
    // [Note: shard groups]: hybrid sharding applies from stage 2, hpZ at stage 3.
    z.hybrid = z.hybrid && stage >= 2;
    if (stage != 3) z.hpz_partition_size = 1;
    groups = ghost_groups(z, world, ranks_per_host);
    const DType wire = dtype_from_name(cfg.precision.dtype);
    // [Note: compute in 16 bits]: a CUDA run in bf16 computes in it, with no f32 copies.
    const bool narrow = cfg.train.device == "cuda" && wire == DType::bf16;
    MemAccounting& mem = meta.accounting();
    // Offload applies where the run allows it: the optimizer's from stage 1, the parameters' at 3.
    if (stage == 0) z.offload_optimizer.device = "none";
    if (stage != 3) z.offload_param.device = "none";
    if (z.offload_optimizer.enabled())
      mem.add(MemCategory::optimizer, optimizer_offload_bytes(model, z, groups.shard, wire != DType::f32));
    if (z.offload_param.enabled()) poff = std::make_unique<GhostParamOffload>(z.offload_param, mem);
    units.reserve(model.num_units());
    std::vector<ScheduledUnit*> all;
    for (const UnitLayout& lay : model.layout())
      all.push_back(&units.emplace_back(lay, z, groups, wire, narrow, rank, poff.get(), clock));
    sched = std::make_unique<ZeroScheduler>(schedule_units(model.layout(), all, unit_groups), z);
    hooks = sched->hooks();
    if (clock) hooks = timed(hooks, model);
    pass = std::make_unique<MetaPass>(model, meta, cfg.micro_batch, cfg.data.seq_len, narrow ? wire : DType::f32);
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
      h.pre_forward(u);
      clock->unit_span(span(in_backward ? "recompute" : "forward", u), true);
    };
    t.post_forward = [this, h, span](int u) {
      clock->unit_span(span(in_backward ? "recompute" : "forward", u), false);
      h.post_forward(u);
    };
    t.pre_backward = [this, h, span](int u) {
      in_backward = true;
      h.pre_backward(u);
      clock->unit_span(span("backward", u), true);
    };
    t.post_backward = [this, h, span](int u) {
      clock->unit_span(span("backward", u), false);
      h.post_backward(u);
    };
    return t;
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
    for (GhostUnit& x : units) x.begin_step();
    for (int micro = 0; micro < cfg.grad_accum; ++micro) {
      sched->begin_pass(z.stage >= 2 || micro == cfg.grad_accum - 1);
      in_backward = false;
      pass->run(hooks, [&] { sched->end_pass(); });
    }
    for (GhostUnit& x : units) x.norm();
    small_reductions();
    // The update: at once, then the kept parameters gathered again; or behind the next forward,
    // each unit's part done where its gather starts (the estimate's bound: as late as allowed).
    const bool deferred = z.offload_optimizer.device == "nvme" && z.offload_optimizer.overlap_step;
    for (GhostUnit& x : units) x.updated(deferred);
    if (!deferred) {
      if (poff) poff->flush();
      sched->gather_kept();
    }
  }

  const Config& cfg;
  ZeroConfig z;
  GhostClock* clock;
  GhostGroups groups;
  MetaAllocator meta;  // the rank's ledger; the model's activations come from it
  GhostRank rank;
  std::unique_ptr<GhostParamOffload> poff;
  std::vector<GhostUnit> units;
  std::vector<std::unique_ptr<UnitGroup>> unit_groups;  // a unit with its adapter units, as the engine drives them
  std::unique_ptr<ZeroScheduler> sched;
  UnitHooks hooks;
  std::vector<std::string> names;
  bool in_backward = false;
  std::unique_ptr<MetaPass> pass;
};

GhostStep::GhostStep(const Config& cfg, const Model& model, int stage, int world, int ranks_per_host, GhostClock* clock)
    : s_(std::make_unique<State>(cfg, model, stage, world, ranks_per_host, clock)) {}
GhostStep::~GhostStep() = default;
void GhostStep::run() { s_->run(); }
MemAccounting& GhostStep::ledger() { return s_->meta.accounting(); }
const GhostGroups& GhostStep::groups() const { return s_->groups; }

}  // namespace zt
