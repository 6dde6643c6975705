#include "runtime/zero/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/backend.hpp"

namespace zt {

ZeroEngine::ZeroEngine(Model& model, Tape& tape, Communicator& comm, const ZeroConfig& zero, const OptimizerConfig& opt,
                       DType wire, const AioConfig& aio)
    : model_(model), comm_(comm), cfg_(zero), shard_groups_(std::make_unique<ShardGroups>(comm, zero)) {
  UnitOptions options;
  options.wire = wire;
  options.offload_states = cfg_.offload_optimizer.enabled();
  options.offload_param = cfg_.offload_param.enabled();
  options.memory = &comm.memory();
  units_.reserve(model.num_units());
  for (int u = 0; u < model.num_units(); ++u) {
    units_.push_back(make_unit(model.layout()[u], cfg_, *shard_groups_, opt, options));
    model.bind_unit(u, units_.back().param_view(), units_.back().grad_view());
  }
  std::vector<ScheduledUnit*> all;
  for (ShardedUnit& x : units_) all.push_back(&x);
  scheduler_ = std::make_unique<ZeroScheduler>(schedule_units(model.layout(), all, groups_), cfg_);
  tape.set_hooks(scheduler_->hooks());
  scheduler_->set_background([this] {
    if (offload_) offload_->poll();
  });
  // [Note: optimizer offload], [Note: parameter offload]: one io_uring engine and one swap folder
  // for both.
  std::string swap_dir;
  if (cfg_.offload_optimizer.device == "nvme" || cfg_.offload_param.device == "nvme") {
    swap_dir = offload_swap_dir(comm);
    io_ = std::make_unique<IoEngine>(aio);
  }
  auto store = [&](const OffloadConfig& o, const char* file, MemCategory c) {
    return o.device == "nvme" ? make_nvme_store(*io_, o.nvme_path, swap_dir, file) : make_host_store(o.pin_memory, c);
  };
  if (options.offload_states)
    offload_ = std::make_unique<OptimizerOffload>(
        units_, cfg_, store(cfg_.offload_optimizer, "optimizer.swp", MemCategory::optimizer), io_.get());
  if (options.offload_param)
    param_offload_ = std::make_unique<ParamOffload>(units_, cfg_.offload_param,
                                                    store(cfg_.offload_param, "params.swp", MemCategory::parameters));
  // The one place units learn of their offloads.
  for (int u = 0; u < static_cast<int>(units_.size()); ++u)
    units_[u].attach_offloads(offload_.get(), param_offload_.get(), u);
}

ZeroEngine::~ZeroEngine() = default;

std::string ZeroEngine::offload_summary() const {
  std::string s;
  if (offload_)
    s = "optimizer states offloaded to " + offload_->where() + " (sub-groups of " + std::to_string(cfg_.sub_group_size) +
        " elements)";
  if (param_offload_) s += (s.empty() ? "" : "; ") + ("parameter shards offloaded to " + param_offload_->where());
  return s;
}

void ZeroEngine::full_params_written(int u) {
  units_[u].full_params_written();
  if (offload_ && !units_[u].frozen()) offload_->store_initial(u);  // a frozen unit has no optimizer
  if (param_offload_) param_offload_->store(u);
}

void ZeroEngine::init_params(uint64_t seed) {
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    ShardedUnit& x = units_[u];
    x.materialize_full_params();
    model_.init_unit(u, seed);
    full_params_written(u);
    x.release();
  }
}

void ZeroEngine::write_full_params(const std::function<void()>& write) {
  for (ShardedUnit& x : units_) x.materialize_full_params();
  write();
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    full_params_written(u);
    units_[u].release();
  }
}

void ZeroEngine::write_params_by_unit(const std::function<void(int u, int64_t begin, int64_t end)>& write, int first) {
  for (int u = first; u < static_cast<int>(units_.size()); ++u) {
    ShardedUnit& x = units_[u];
    x.materialize_full_params();
    const auto [begin, end] = x.write_range();
    write(u, begin, end);
    full_params_written(u);
    // At stage 3 the full parameters hold this rank's slice only: a persistent unit (kept
    // gathered) is gathered again from the shards, as after an update or a loaded checkpoint.
    if (cfg_.stage == 3) x.state_loaded();
    else x.release();
  }
  if (cfg_.stage == 3) scheduler_->gather_kept();
}

void ZeroEngine::visit_state(const StateVisitor& visit, bool load) {
  finish_update();
  // A region in host memory is visited in place; one on a device through a host copy (taken
  // before a save's visit, written back after a load's).
  auto visit_tensor = [&](int u, StateRegion r, const Tensor& t) {
    if (t.device() == Device::cpu) return visit(u, r, 0, t.numel(), t.raw());
    const Tensor host = load ? Tensor::empty(t.shape(), t.dtype(), MemCategory::other)
                             : t.to(cpu_allocator(), MemCategory::other);
    visit(u, r, 0, t.numel(), host.raw());
    if (load) t.copy_from(host);
  };
  if (param_offload_) param_offload_->flush();
  const int U = static_cast<int>(units_.size());
  // The shards first: an offloaded one is brought here for it (a save reads buffer_count units
  // ahead), and stored again after a load.
  const int ahead = load || !param_offload_ ? 0 : cfg_.offload_param.buffer_count;
  for (int u = 0; u < U; ++u) {
    ShardedUnit& x = units_[u];
    if (x.frozen()) continue;  // [Note: frozen units]: re-read from the model the run started from
    const bool away = param_offload_ && x.param_offloaded();
    for (int k = u + 1; k <= std::min(U - 1, u + ahead); ++k) param_offload_->fetch(k);  // a no-op for kept units
    if (away) {
      if (load) param_offload_->make_room(u);
      else param_offload_->ready(u);
    }
    visit_tensor(u, StateRegion::param, x.param_shard());
    if (away) {
      if (load) param_offload_->store(u);
      else param_offload_->done_with(u);
    }
  }
  // Then the optimizer's: offloaded ones sub-group by sub-group, read ahead (save) or written
  // behind (load).
  if (offload_) {
    offload_->visit_all(load, [&](int u, int64_t begin, int64_t n, float* master, float* m, float* v) {
      ShardedUnit& x = units_[u];
      if (x.param_shard().dtype() != DType::f32)
        visit(u, StateRegion::master, begin, n, master ? master : x.master().data<float>() + begin);
      visit(u, StateRegion::m, begin, n, m);
      visit(u, StateRegion::v, begin, n, v);
    });
  } else {
    for (int u = 0; u < U; ++u) {
      ShardedUnit& x = units_[u];
      if (x.frozen()) continue;
      if (x.param_shard().dtype() != DType::f32) visit_tensor(u, StateRegion::master, x.master());
      visit_tensor(u, StateRegion::m, x.adam_m());
      visit_tensor(u, StateRegion::v, x.adam_v());
    }
  }
  if (!load) return;
  if (param_offload_) param_offload_->flush();
  for (ShardedUnit& x : units_) x.state_loaded();
  scheduler_->gather_kept();
}

void ZeroEngine::finish_update() {
  if (offload_) offload_->finish();
}

void ZeroEngine::gather_all() {
  for (ShardedUnit& x : units_)
    if (x.state() == ParamState::sharded) x.start_gather();
  for (ShardedUnit& x : units_) x.wait_gather();
}

void ZeroEngine::for_each_full_unit(const std::function<void(int)>& fn, int first, int last) {
  for (int u = first; u < (last < 0 ? static_cast<int>(units_.size()) : last); ++u) {
    ShardedUnit& x = units_[u];
    if (x.state() == ParamState::sharded) x.start_gather();
    x.wait_gather();
    fn(u);
    x.release();  // nothing for persistent units
  }
}

void ZeroEngine::read_full_params(const std::function<void()>& read) {
  gather_all();
  read();
  for (ShardedUnit& x : units_) x.release();
}

void ZeroEngine::begin_step() {
  for (ShardedUnit& x : units_) x.begin_step();
}

void ZeroEngine::begin_pass(bool last_micro_batch) { scheduler_->begin_pass(cfg_.stage >= 2 || last_micro_batch); }

void ZeroEngine::end_pass() { scheduler_->end_pass(); }

double ZeroEngine::grad_norm() {
  double sq = backend(comm_.memory().device()).sum_squares(grad_shards());
  // Shards: add up every rank's part, over the shard group (its replicas hold the same parts).
  Communicator& shard = shard_groups_->shard();
  if (cfg_.stage > 0 && shard.size() > 1) sq = shard.all_reduce_value(static_cast<float>(sq), ReduceOp::sum);
  // The replicas' sums are the same numbers; that every rank acts on the same norm (clipping, a
  // non-finite step) should not rest on their all-reduces rounding alike.
  if (shard_groups_->replicas()) sq = comm_.all_reduce_value(static_cast<float>(sq), ReduceOp::max);
  return std::sqrt(sq);
}

std::vector<Tensor> ZeroEngine::grad_shards() const {
  // This rank's gradients (stage 0: every unit's whole, the same on every rank), in unit order.
  std::vector<Tensor> shards;
  for (const ShardedUnit& x : units_)
    if (!x.frozen()) shards.push_back(x.grad_shard());
  return shards;
}

void ZeroEngine::set_trace(Trace* t) {
  trace_ = t;
  scheduler_->set_trace(t);
  if (offload_) offload_->set_trace(t);
  if (param_offload_) param_offload_->set_trace(t);
  for (ShardedUnit& x : units_) x.set_trace(t);
}

bool ZeroEngine::grads_overflowed() {
  const bool bad = backend(comm_.memory().device()).any_nonfinite(grad_shards());
  if (comm_.size() == 1) return bad;
  return comm_.all_reduce_value(bad ? 1.0f : 0.0f, ReduceOp::max) != 0.0f;
}

void ZeroEngine::poison_grads() {
  for (ShardedUnit& x : units_)
    if (!x.frozen() && x.grad_shard().numel() > 0)
      return x.grad_shard().view(0, {1}).fill(std::numeric_limits<float>::infinity());
}

void ZeroEngine::update(float lr, float grad_scale, int t) {
  if (offload_ && offload_->can_defer() && cfg_.offload_optimizer.overlap_step) {
    // [Note: update behind the next forward]: each unit's gather finishes its update; the
    // scheduler's polls move the rest on.
    offload_->begin(lr, grad_scale, t);
    return;
  }
  if (offload_) {
    offload_->update(lr, grad_scale, t);
  } else {
    Trace::Scope span(trace_, TraceLane::optimizer, "adamw");
    for (ShardedUnit& x : units_) x.update(lr, grad_scale, t);
  }
  if (param_offload_) param_offload_->flush();
  scheduler_->gather_kept();
}

}  // namespace zt
