#include "runtime/plan/estimate.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "models/registry.hpp"
#include "offload/swap_store.hpp"
#include "runtime/plan/estimate_activations.hpp"
#include "runtime/zero/groups.hpp"
#include "runtime/train/metrics.hpp"
#include "runtime/train/trainer.hpp"
#include "runtime/zero/buffer_plan.hpp"
#include "runtime/zero/scheduler.hpp"
#include "runtime/zero/shard.hpp"
#include "runtime/zero/unit_group.hpp"

namespace zt {

namespace {

size_t f32_bytes(int64_t elements) { return static_cast<size_t>(elements) * sizeof(float); }

// ---- The ZeRO engine's buffers, driven by its own scheduler -----------------------------------

// The communicator's f32 staging buffers for 16-bit reductions (comm/mpi_communicator.cpp's
// StagingPool): handed out first fit, taken back when the operation completes, never freed.
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

// The ranks a GhostUnit's collectives span: the run's, a shard group's, an hpZ group's (1: none).
struct GhostGroups {
  int world, shard, secondary;
  bool shm;  // the shard group's ranks share one host (consecutive ranks, ranks_per_host a host)
};

// One rank's ShardedUnit (runtime/zero/sharded_unit.hpp) without its buffers: the same buffer plan
// (runtime/zero/buffer_plan.hpp), each buffer charged to the ledger where the unit allocates or
// frees it, and the real ZeroScheduler decides when. A collective completes where the scheduler
// waits for it, or (a gather) where it first tests it; a reduction is only waited for where
// reduce_bucket_size forces it, which gives the bound the rules allow for the full gradients of
// stages 2-3.
class GhostUnit final : public ScheduledUnit {
 public:
  // `wire`: f32, or the 16-bit type of [Note: mixed precision]; the host computes in f32.
  // `poff`: the parameter offload, null without one. `groups`: the ranks of the run, of a shard
  // group and of an hpZ group ([Note: shard groups]).
  GhostUnit(const UnitLayout& lay, const ZeroConfig& z, const GhostGroups& groups, DType wire, GhostRank& rank,
            GhostParamOffload* poff)
      : name_(lay.name),
        geo_(shard_geometry(lay.numel, groups.shard, 0)),
        stage_(z.stage),
        world_(groups.world),
        shm_(groups.shm),
        frozen_(lay.frozen()),
        persistent_(keeps_full_params(lay.numel, frozen_, z)),
        rank_(rank),
        mem_(rank.mem) {
    BufferPlanInput in;
    in.geo = geo_, in.stage = stage_, in.persistent = persistent_, in.wire = wire;
    in.offload_states = z.offload_optimizer.enabled(), in.offload_param = poff != nullptr;
    in.frozen = frozen_;
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
  }
  bool gather_done() override {
    wait_gather();
    return state_ == ParamState::gathered;
  }
  void wait_gather() override {
    if (state_ != ParamState::gathering) return;
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
    if (deferred) pending_ = true;
    else finish_update();
  }

  void prepare_grads() override {
    if (grads_) return;
    charge(UnitBuffer::full_grads);
    grads_ = true;
  }
  void start_reduce(bool scatter) override {
    if (frozen_) return;  // nothing to average
    const int64_t P = geo_.padded(), S = geo_.shard;
    const bool wire = plan_[UnitBuffer::wire_grads].exists();
    if (world_ == 1) {
      // One rank: done at once; in 16 bits the gradients round through a temporary 16-bit copy.
      charge(UnitBuffer::wire_grads);
      drop(UnitBuffer::wire_grads);
      finish_reduce();
      return;
    }
    const bool all_reduce = stage_ == 0 || !scatter;
    if (wire) charge(UnitBuffer::wire_grads);  // the 16-bit copy of the gradients
    reducing_ = true;
    // A shard group within one host reduces through its shared-memory channel, in buffers of its
    // own outside the ledger ([Note: shared-memory collectives] in comm/shm_channel.hpp).
    if (shm_) return;
    // Across hosts, MPI's: 16 bits stage through f32, in and out of an all-reduce, or in and
    // this rank's slice of a reduce-scatter.
    if (wire) staged_ = rank_.staging.get(all_reduce ? 2 * P : P + S);
    // comm/mpi_communicator.cpp: a reduce-scatter (f32, or the staged f32 of 16 bits) runs as a
    // ring through a buffer of twice the shard, kept between operations and grown (new before old
    // is freed) for a longer shard. All-reduces run in MPI's own buffers.
    if (!all_reduce && 2 * S > rank_.ring) {
      mem_.add(MemCategory::communication, f32_bytes(2 * S));
      mem_.sub(MemCategory::communication, f32_bytes(rank_.ring));
      rank_.ring = 2 * S;
    }
  }
  bool reduce_done() override { return !reducing_; }
  void wait_reduce() override {
    if (reducing_) finish_reduce();
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

  void finish_reduce() {
    if (reducing_ && plan_[UnitBuffer::wire_grads].exists()) {
      if (!shm_) rank_.staging.put(staged_);
      drop(UnitBuffer::wire_grads);
    }
    reducing_ = false;
    if (plan_[UnitBuffer::full_grads].life == BufferLife::kept) return;
    drop(UnitBuffer::full_grads);
    grads_ = false;
  }

  std::string name_;
  ShardGeometry geo_;
  int stage_, world_;
  bool shm_;  // the shard group lies on one host
  bool frozen_;
  bool persistent_;
  BufferPlan plan_;
  GhostRank& rank_;
  MemAccounting& mem_;
  ParamState state_;
  bool grads_ = false, reducing_ = false;
  size_t staged_ = 0;  // the staging buffer of the reduction in flight
  GhostParamOffload* poff_ = nullptr;
  int index_ = -1;
  bool pending_ = false;  // an update behind the next forward
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

// ---- One stage ---------------------------------------------------------------------------------

// Two steps as Trainer::step runs them; the peaks are the second's (the first records the
// schedule and grows the communicator's buffer, as a real run's first step does).
StageEstimate estimate_stage(const Config& cfg, const Model& model, int stage, int world, int ranks_per_host) {
  ZeroConfig z = cfg.zero;
  z.stage = stage;
  // [Note: shard groups]: hybrid sharding applies from stage 2, hpZ at stage 3.
  z.hybrid = z.hybrid && stage >= 2;
  if (stage != 3) z.hpz_partition_size = 1;
  GhostGroups ranks{world, world, 1, false};
  if (z.hybrid) ranks.shard = shard_group_ranks(z, world, ranks_per_host);
  else if (z.hpz_partition_size > 1) ranks.secondary = shard_group_ranks(z, world, ranks_per_host);
  ranks.shm = ranks.shard > 1 && ranks.shard <= ranks_per_host && ranks_per_host % ranks.shard == 0;
  const DType wire = dtype_from_name(cfg.precision.dtype);
  MetaAllocator meta;  // the rank's ledger; the model's activations come from it
  MemAccounting& mem = meta.accounting();
  GhostRank rank(mem);
  // Offload applies where the run allows it: the optimizer's from stage 1, the parameters' at 3.
  if (stage == 0) z.offload_optimizer.device = "none";
  if (stage != 3) z.offload_param.device = "none";
  if (z.offload_optimizer.enabled())
    mem.add(MemCategory::optimizer, optimizer_offload_bytes(model, z, ranks.shard, wire != DType::f32));
  std::unique_ptr<GhostParamOffload> poff;
  if (z.offload_param.enabled()) poff = std::make_unique<GhostParamOffload>(z.offload_param, mem);
  std::vector<GhostUnit> units;
  units.reserve(model.num_units());
  std::vector<ScheduledUnit*> all;
  for (const UnitLayout& lay : model.layout()) all.push_back(&units.emplace_back(lay, z, ranks, wire, rank, poff.get()));
  std::vector<std::unique_ptr<UnitGroup>> groups;  // a unit with its adapter units, as the engine drives them
  ZeroScheduler sched(schedule_units(model.layout(), all, groups), z);
  const UnitHooks hooks = sched.hooks();
  MetaPass pass(model, meta, cfg.micro_batch, cfg.data.seq_len);
  for (int step = 0; step < 2; ++step) {
    mem.reset_peaks();
    for (int micro = 0; micro < cfg.grad_accum; ++micro) {
      sched.begin_pass(stage >= 2 || micro == cfg.grad_accum - 1);
      pass.run(hooks, [&] { sched.end_pass(); });
    }
    // One-element all-reduces: fp16's overflow flag, the gradient norm (sharded stages) and the
    // loss. The MPI progress thread may still hold one (its finished operation captured it) when
    // the next is allocated.
    const size_t flag = cfg.precision.dtype == "f16" && world > 1 ? sizeof(int32_t) : 0;
    const size_t norm = stage > 0 && world > 1 ? sizeof(float) : 0, loss = world > 1 ? sizeof(float) : 0;
    for (size_t b : {flag, norm, loss}) mem.add(MemCategory::communication, b);
    mem.sub(MemCategory::communication, flag + norm + loss);
    // The update: at once, then the kept parameters gathered again; or behind the next forward,
    // each unit's part done where its gather starts (the estimate's bound: as late as allowed).
    const bool deferred = z.offload_optimizer.device == "nvme" && z.offload_optimizer.overlap_step;
    for (GhostUnit& x : units) x.updated(deferred);
    if (!deferred) {
      if (poff) poff->flush();
      sched.gather_kept();
    }
  }
  const MemSnapshot s = mem.snapshot();
  StageEstimate e;
  e.stage = stage;
  e.peak = s.peak;
  e.total = s.total_peak;
  return e;
}

// [Note: DeepSpeed's estimate] The DeepSpeed column is DeepSpeed's own model-states numbers as
// deepspeed/runtime/zero/stage_1_and_2.py and stage3.py write them (0.19.8): the GPU memory of
// estimate_zero2_model_states_mem_needs (2P + int(18P/N); 2P with cpu_offload) and of
// estimate_zero3_model_states_mem_needs (4L + int(18P/N); with cpu_offload 4L + int(2P/N), or 4L
// with cpu_offload_params too), for 16-bit parameters and gradients with fp32 master weights and
// Adam states, P parameters over N GPUs, offload as configured (the optimizer's, cpu or nvme,
// is DeepSpeed's cpu_offload). L is DeepSpeed's "largest layer" (model_to_params): the most
// parameters one torch module holds itself, for GPT-2 its token embedding (Vp x C), not a ztrain
// unit. Stages 0-1, for which DeepSpeed has no estimator, take the ZeRO paper's 16P and 4P + 12P/N.
// tests/ref/deepspeed_estimate.py holds every figure to DeepSpeed's own functions.
int64_t deepspeed_model_states(int stage, int64_t P, int64_t largest_layer, int N, const ZeroConfig& z) {
  // Python's int(a * P / N): the quotient correctly rounded to a double, then truncated; P below
  // 2^53 / 18 keeps 18P exact as a double.
  auto share = [&](int64_t a) { return static_cast<int64_t>(static_cast<double>(a * P) / N); };
  const bool cpu_offload = z.offload_optimizer.enabled(), cpu_offload_params = z.offload_param.enabled();
  switch (stage) {
    case 0: return 16 * P;
    case 1: return 4 * P + share(12);
    case 2: return cpu_offload ? 2 * P : 2 * P + share(18);
    default: {
      const int64_t largest_layer_memory = 4 * largest_layer;
      if (!cpu_offload) return largest_layer_memory + share(18);
      return cpu_offload_params ? largest_layer_memory : largest_layer_memory + share(2);
    }
  }
}

std::string cell(const std::string& s, size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

const char* precision_name(const std::string& dtype) {
  return dtype == "bf16" ? "bf16 (fp32 master weights)" : dtype == "f16" ? "fp16 (fp32 master weights)" : "fp32";
}

// zero_optimization.frozen_params, in the order MemoryEstimate::frozen_policies holds them.
constexpr const char* kFrozenPolicies[] = {"sharded", "replicated"};

std::string category(size_t c) { return std::string(category_name(static_cast<MemCategory>(c))); }

}  // namespace

MemoryEstimate estimate_memory(const Config& cfg, int world_size, int ranks_per_host) {
  if (ranks_per_host <= 0) ranks_per_host = world_size;
  std::string why;  // built by appending: GCC 12 -O3 warns (-Wrestrict) on "literal" + std::string
  if (world_size < 1) {
    why = "estimate: the world size must be >= 1, got ";
    throw ConfigError(why + std::to_string(world_size));
  }
  check_batch_size(cfg, world_size);
  MemoryEstimate e;
  e.dims = resolve_dims(cfg);
  e.world_size = world_size;
  if (cfg.data.seq_len > e.dims.max_seq_len) {
    why = "config: data.seq_len: ";
    why += std::to_string(cfg.data.seq_len) + " exceeds the model's max_seq_len " + std::to_string(e.dims.max_seq_len);
    throw ConfigError(why);
  }
  if (e.dims.n_embd % e.dims.n_head != 0) {
    why = "config: model.n_embd: ";
    why += std::to_string(e.dims.n_embd) + " is not divisible by model.n_head " + std::to_string(e.dims.n_head);
    throw ConfigError(why);
  }
  const std::unique_ptr<Model> owned = make_run_model(cfg, e.dims, cfg.model.wte_units);
  const Model& model = *owned;
  e.num_params = model.num_params();
  e.trainable_params = model.num_trainable_params();
  for (const UnitLayout& u : model.layout()) e.largest_unit = std::max(e.largest_unit, u.numel);
  e.deepspeed_largest_layer = model.deepspeed_largest_layer();
  for (int stage = 0; stage <= 3; ++stage) {
    e.stages.push_back(estimate_stage(cfg, model, stage, world_size, ranks_per_host));
    e.stages.back().deepspeed = static_cast<size_t>(
        deepspeed_model_states(stage, e.num_params, e.deepspeed_largest_layer, world_size, cfg.zero));
  }
  e.checkpointing = cfg.activation_checkpointing.describe();
  using Mode = ActivationCheckpointing::Mode;
  for (const Mode m : {Mode::none, Mode::full, Mode::selective_op, Mode::selective_block}) {
    Config c = cfg;
    ActivationCheckpointing& a = c.activation_checkpointing;
    if (m == Mode::selective_block && a.mode != m) a.every = 2;
    a.mode = m;
    a.cpu_checkpointing = a.cpu_checkpointing && m != Mode::none;
    const std::unique_ptr<Model> moded = make_run_model(c, e.dims, c.model.wte_units);
    e.checkpointing_modes.emplace_back(a.describe(), estimate_stage(c, *moded, cfg.zero.stage, world_size, ranks_per_host));
  }
  if (e.trainable_params < e.num_params) {  // [Note: frozen units]: stage 3 under both policies
    for (const char* policy : kFrozenPolicies) {
      Config c = cfg;
      c.zero.frozen_params = policy;
      e.frozen_policies.push_back(estimate_stage(c, model, 3, world_size, ranks_per_host));
    }
  }
  return e;
}

std::string format_estimate(const Config& cfg, const MemoryEstimate& e) {
  const ZeroConfig& z = cfg.zero;
  char head[1024];
  std::snprintf(head, sizeof head,
                "model %s: %s; %.2fM parameters, largest unit %.2fM (DeepSpeed's largest layer %.2fM)\n"
                "per rank of %d: micro-batch %d x seq_len %d, accumulation %d; %s, AdamW\n"
                "zero_optimization: reduce_bucket_size %lld, stage3_prefetch_bucket_size %lld, "
                "stage3_max_live_parameters %lld, stage3_param_persistence_threshold %lld, overlap_comm %s, "
                "reduce_scatter %s\n\n",
                cfg.model.arch.c_str(), dims_str(e.dims).c_str(), static_cast<double>(e.num_params) / 1e6,
                static_cast<double>(e.largest_unit) / 1e6, static_cast<double>(e.deepspeed_largest_layer) / 1e6,
                e.world_size, cfg.micro_batch, cfg.data.seq_len,
                cfg.grad_accum, precision_name(cfg.precision.dtype), static_cast<long long>(z.reduce_bucket_size),
                static_cast<long long>(z.prefetch_bucket_size), static_cast<long long>(z.max_live_parameters),
                static_cast<long long>(z.param_persistence_threshold), z.overlap_comm ? "true" : "false",
                z.reduce_scatter ? "true" : "false");
  std::string out = head;
  constexpr size_t kWidth = 14;
  out += "stage ";
  for (size_t c = 0; c < kMemCategories; ++c) out += cell(category(c), kWidth);
  out += cell("total", kWidth);
  out += cell("DeepSpeed", kWidth);
  out += '\n';
  for (const StageEstimate& s : e.stages) {
    out += std::to_string(s.stage);
    out += s.stage == z.stage ? "*    " : "     ";
    for (size_t c = 0; c < kMemCategories; ++c) out += cell(human_bytes(s.peak[c]), kWidth);
    out += cell(human_bytes(s.total), kWidth);
    out += cell(human_bytes(s.deepspeed), kWidth);
    out += '\n';
  }
  if (!e.frozen_policies.empty()) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "\nfrozen parameters (LoRA): %.2fM of %.2fM train; zero_optimization.frozen_params at stage 3:\n",
                  static_cast<double>(e.trainable_params) / 1e6, static_cast<double>(e.num_params) / 1e6);
    out += line;
    const char* what[] = {"each rank its shard, gathered for each use", "whole on every rank, never gathered"};
    for (size_t i = 0; i < e.frozen_policies.size(); ++i) {
      const StageEstimate& s = e.frozen_policies[i];
      std::snprintf(line, sizeof line, "  %-10s%s parameters %s, total %s (%s)\n", kFrozenPolicies[i],
                    z.frozen_params == kFrozenPolicies[i] ? "*" : " ", human_bytes(s.peak_of(MemCategory::parameters)).c_str(),
                    human_bytes(s.total).c_str(), what[i]);
      out += line;
    }
  }
  {
    char line[512];
    std::snprintf(line, sizeof line, "\nactivation checkpointing at stage %d (configured: %s):\n", z.stage,
                  e.checkpointing.c_str());
    out += line;
    const size_t none = e.checkpointing_modes.empty() ? 0 : e.checkpointing_modes[0].second.peak_of(MemCategory::activations);
    for (const auto& [mode, s] : e.checkpointing_modes) {
      const size_t act = s.peak_of(MemCategory::activations);
      std::snprintf(line, sizeof line, "  %-32s activations %10s (%5.1f%% of none), total %10s\n", mode.c_str(),
                    human_bytes(act).c_str(), none ? 100.0 * static_cast<double>(act) / static_cast<double>(none) : 0.0,
                    human_bytes(s.total).c_str());
      out += line;
    }
  }
  out +=
      "\n* the configured stage. Peaks per rank during a training step (from the second on), each category's\n"
      "own; total is the peak of their sum. Reductions are taken to stay in flight until reduce_bucket_size\n"
      "forces a wait, so stage 2-3 gradients (and totals) are the bound the schedule allows: reductions that\n"
      "finish sooner free their buffers sooner. MPI's own buffers are not counted. DeepSpeed: its own GPU\n"
      "model-states estimate for the same parameters, ranks and offload (stages 2-3: DeepSpeed 0.19.8's\n"
      "estimate_zero2/3_model_states_mem_needs, 2P+18P/N and 4L+18P/N with L its largest layer, the token\n"
      "embedding; stages 0-1: the ZeRO paper's 16P and 4P+12P/N), for 16-bit parameters and gradients with fp32\n"
      "master weights. Here compute on the CPU widens to f32: the parameters and gradients the model uses are\n"
      "f32 in every precision, and bf16/fp16 add 16-bit parameter shards, wire buffers and fp32 masters.\n";
  if (cfg.train.device == "cuda" && cfg.precision.dtype == "bf16")
    out +=
        "\nNot modelled yet: train.device cuda computes in bf16 (runtime/zero/sharded_unit.hpp, [Note: compute\n"
        "in 16 bits]), so there the model's parameters and gradients take 2 bytes an element with no f32 copy\n"
        "and no wire buffer; the figures above are the CPU's layout, an upper bound for those categories.\n";
  return out;
}

namespace {
// A stage's peaks as the metrics file's peak_bytes.
nlohmann::json peak_json(const StageEstimate& s) {
  nlohmann::json peak;
  for (size_t c = 0; c < kMemCategories; ++c) peak[category(c)] = s.peak[c];
  peak["total"] = s.total;
  return peak;
}
}  // namespace

std::string estimate_json(const MemoryEstimate& e) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageEstimate& s : e.stages)
    stages.push_back({{"stage", s.stage}, {"peak_bytes", peak_json(s)}, {"deepspeed_model_states", s.deepspeed}});
  nlohmann::json frozen = nlohmann::json::object();
  for (size_t i = 0; i < e.frozen_policies.size(); ++i) frozen[kFrozenPolicies[i]] = {{"peak_bytes", peak_json(e.frozen_policies[i])}};
  nlohmann::json modes = nlohmann::json::object();
  for (const auto& [mode, s] : e.checkpointing_modes) modes[mode] = {{"peak_bytes", peak_json(s)}};
  return nlohmann::json{{"world_size", e.world_size},
                        {"activation_checkpointing", {{"configured", e.checkpointing}, {"modes", modes}}},
                        {"params", e.num_params},
                        {"trainable_params", e.trainable_params},
                        {"stage3_frozen_params", frozen},
                        {"largest_unit", e.largest_unit},
                        {"deepspeed_largest_layer", e.deepspeed_largest_layer},
                        {"stages", stages}}
             .dump() +
         "\n";
}

}  // namespace zt
