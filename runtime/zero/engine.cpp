#include "runtime/zero/engine.hpp"

#include <cmath>
#include <limits>

namespace zt {

ZeroEngine::ZeroEngine(GPT2& model, Tape& tape, Communicator& comm, const ZeroConfig& zero, const OptimizerConfig& opt,
                       DType wire)
    : model_(model), comm_(comm), cfg_(zero) {
  units_.reserve(model.num_units());
  for (int u = 0; u < model.num_units(); ++u) {
    const UnitLayout& lay = model.layout()[u];
    Ranges decayed;
    for (const ParamSpec& p : lay.params)
      if (p.decay) decayed.emplace_back(p.offset, p.offset + shape_numel(p.shape));
    const bool small = lay.numel < cfg_.param_persistence_threshold;
    units_.emplace_back(lay.name, lay.numel, decayed, cfg_.stage, small, comm, opt, wire);
    model.bind_unit(u, units_.back().param_view(), units_.back().grad_view());
  }
  std::vector<ScheduledUnit*> scheduled;
  for (ShardedUnit& x : units_) scheduled.push_back(&x);
  scheduler_ = std::make_unique<ZeroScheduler>(std::move(scheduled), cfg_);
  tape.set_hooks(scheduler_->hooks());
}

void ZeroEngine::init_params(uint64_t seed) {
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    ShardedUnit& x = units_[u];
    x.materialize_full_params();
    model_.init_unit(u, seed);
    x.full_params_written();
    x.release();
  }
}

void ZeroEngine::write_full_params(const std::function<void()>& write) {
  for (ShardedUnit& x : units_) x.materialize_full_params();
  write();
  for (ShardedUnit& x : units_) {
    x.full_params_written();
    x.release();
  }
}

void ZeroEngine::gather_all() {
  for (ShardedUnit& x : units_)
    if (x.state() == ParamState::sharded) x.start_gather();
  for (ShardedUnit& x : units_) x.wait_gather();
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
  double sq = 0.0;
  for (const ShardedUnit& x : units_) sq += x.grad_sum_squares();
  if (cfg_.stage > 0 && comm_.size() > 1) {  // shards: add up every rank's part
    Tensor t = Tensor::empty({1}, DType::f32, MemCategory::communication);
    t.data<float>()[0] = static_cast<float>(sq);
    comm_.all_reduce(t, ReduceOp::sum);
    sq = t.data<float>()[0];
  }
  return std::sqrt(sq);
}

void ZeroEngine::set_trace(Trace* t) {
  trace_ = t;
  scheduler_->set_trace(t);
  for (ShardedUnit& x : units_) x.set_trace(t);
}

bool ZeroEngine::grads_overflowed() {
  bool bad = false;
  for (const ShardedUnit& x : units_) bad = bad || x.grads_nonfinite();
  if (comm_.size() == 1) return bad;
  Tensor t = Tensor::empty({1}, DType::i32, MemCategory::communication);
  t.data<int32_t>()[0] = bad ? 1 : 0;
  comm_.all_reduce(t, ReduceOp::max);
  return t.data<int32_t>()[0] != 0;
}

void ZeroEngine::poison_grads() {
  units_.front().grad_shard().data<float>()[0] = std::numeric_limits<float>::infinity();
}

void ZeroEngine::update(float lr, float grad_scale, int t) {
  {
    Trace::Scope span(trace_, TraceLane::optimizer, "adamw");
    for (ShardedUnit& x : units_) x.update(lr, grad_scale, t);
  }
  scheduler_->gather_kept();
}

}  // namespace zt
