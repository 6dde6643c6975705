#include "runtime/zero/scheduler.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace zt {

ZeroScheduler::ZeroScheduler(std::vector<ScheduledUnit*> units, const ZeroConfig& cfg)
    : units_(std::move(units)), cfg_(cfg), stage_(cfg.stage), writers_left_(units_.size(), 0) {}

UnitHooks ZeroScheduler::hooks() {
  return {[this](int u) { pre(u, false); }, [this](int u) { post(u, false); }, [this](int u) { pre(u, true); },
          [this](int u) { post(u, true); }};
}

int ZeroScheduler::unit_at(size_t pos) const {
  const size_t F = order_.size();
  return pos < F ? order_[pos] : pos < 2 * F ? order_[2 * F - 1 - pos] : -1;
}

void ZeroScheduler::begin_pass(bool reduce) {
  if (!order_.empty()) frozen_ = true;
  pos_ = 0;
  reduce_ = reduce;
  std::fill(writers_left_.begin(), writers_left_.end(), 0);
  for (int u : order_) ++writers_left_[u];
}

bool ZeroScheduler::record(int u, bool backward) {
  const size_t F = order_.size();
  if (!frozen_) {
    if (!backward) {  // the first forward pass
      order_.push_back(u);
      return false;
    }
    frozen_ = true;  // the first backward: the forward order is complete
    begin_pass(reduce_);
    pos_ = F;
  }
  const int want = unit_at(pos_);
  if (!backward && pos_ >= F && want == u) return true;  // recomputed just before its backward
  if (want != u)
    throw std::logic_error("ZeRO schedule: unit " + units_.at(u)->name() + " ran " +
                           (backward ? "backward" : "forward") + " at position " + std::to_string(pos_) +
                           " where the recorded order has " + (want < 0 ? std::string("none") : units_[want]->name()));
  return false;
}

void ZeroScheduler::gather_now(int u) {
  ScheduledUnit& x = *units_[u];
  if (x.state() == ParamState::sharded) x.start_gather();
  x.wait_gather();
}

void ZeroScheduler::pre(int u, bool backward) {
  poll();
  recomputing_ = record(u, backward);
  gather_now(u);
  running_ = u;
  if (backward) {
    ScheduledUnit& x = *units_[u];
    if (x.reducing()) {  // its previous backward's reduction, in place on the full gradients
      x.wait_reduce();
      reducing_.erase(std::find(reducing_.begin(), reducing_.end(), u));
    }
    x.prepare_grads();
  }
  prefetch();
  prefetch_shards();
  compute_started_ = Trace::clock::now();
}

void ZeroScheduler::post(int u, bool backward) {
  if (trace_)
    trace_->span(TraceLane::compute,
                 (backward ? "backward " : recomputing_ ? "recompute " : "forward ") + units_[u]->name(),
                 compute_started_, Trace::clock::now());
  running_ = -1;
  if (recomputing_) {  // its backward comes next, at the same position
    recomputing_ = false;
    poll();
    return;
  }
  if (backward && reduce_ && (--writers_left_[u] == 0 || stage_ >= 2)) reduce(u);
  ScheduledUnit& x = *units_[u];
  if (!x.persistent() && x.state() == ParamState::gathered && !reused_soon(u)) x.release();
  ++pos_;
  poll();
}

bool ZeroScheduler::reused_soon(int u) const {
  if (!frozen_) return false;
  int64_t between = 0;  // elements of the units that run before u again
  for (size_t p = pos_ + 1; p < 2 * order_.size(); ++p) {
    const int w = unit_at(p);
    if (w == u) return between == 0 || live_numel() <= cfg_.max_live_parameters;
    between += units_[w]->numel();
    if (between > cfg_.max_reuse_distance) return false;
  }
  return false;
}

void ZeroScheduler::prefetch() {
  if (stage_ < 3 || !frozen_) return;
  // Looks ahead over the units the next positions need and no running unit holds, each counted
  // once, until they add up to more than the prefetch bucket; gathers those not gathered yet.
  int64_t ahead = 0, live = live_numel();
  std::vector<char> counted(units_.size(), 0);
  for (size_t p = pos_ + 1; p < 2 * order_.size(); ++p) {
    const int v = unit_at(p);
    ScheduledUnit& x = *units_[v];
    if (x.persistent() || v == running_ || counted[v]) continue;
    counted[v] = 1;
    ahead += x.numel();
    if (ahead > cfg_.prefetch_bucket_size) return;
    if (x.state() != ParamState::sharded) continue;
    if (live + x.numel() > cfg_.max_live_parameters) return;
    x.start_gather();
    live += x.numel();
  }
}

void ZeroScheduler::prefetch_shards() {
  const OffloadConfig& o = cfg_.offload_param;
  if (stage_ < 3 || !frozen_ || !o.enabled()) return;
  // The shards of the next units to gather that are not gathered or coming, in schedule order, up
  // to buffer_count units and buffer_count x buffer_size elements ([Note: parameter offload]).
  int count = 0;
  int64_t elements = 0;
  std::vector<char> seen(units_.size(), 0);
  for (size_t p = pos_ + 1; p < 2 * order_.size() && count < o.buffer_count; ++p) {
    const int v = unit_at(p);
    ScheduledUnit& x = *units_[v];
    if (x.persistent() || seen[v] || x.state() != ParamState::sharded) continue;
    seen[v] = 1;
    elements += x.numel();
    if (count > 0 && elements > static_cast<int64_t>(o.buffer_count) * o.buffer_size) return;
    x.prefetch_shard();
    ++count;
  }
}

void ZeroScheduler::reduce(int u) {
  auto in_flight = [&] {
    int64_t n = 0;
    for (int v : reducing_) n += units_[v]->numel();
    return n;
  };
  while (!reducing_.empty() && in_flight() + units_[u]->numel() > cfg_.reduce_bucket_size) {
    units_[reducing_.front()]->wait_reduce();
    reducing_.pop_front();
  }
  ScheduledUnit& x = *units_[u];
  x.start_reduce(cfg_.reduce_scatter);
  if (!cfg_.overlap_comm) x.wait_reduce();
  if (x.reducing()) reducing_.push_back(u);
}

void ZeroScheduler::poll() {
  for (auto it = reducing_.begin(); it != reducing_.end();)
    it = units_[*it]->reduce_done() ? reducing_.erase(it) : it + 1;
  for (ScheduledUnit* x : units_) x->gather_done();
  if (background_) background_();
}

void ZeroScheduler::end_pass() {
  for (int v : reducing_) units_[v]->wait_reduce();
  reducing_.clear();
  for (ScheduledUnit* x : units_) {
    x->wait_gather();
    if (!x->persistent() && x->state() == ParamState::gathered) x->release();
  }
  running_ = -1;
  recomputing_ = false;
}

void ZeroScheduler::gather_kept() {
  if (stage_ == 0) return;
  std::deque<ScheduledUnit*> in_flight;
  int64_t elements = 0;
  for (ScheduledUnit* x : units_) {
    // Frozen units never go stale ([Note: frozen units] in runtime/zero/sharded_unit.hpp).
    if (!x->persistent() || x->state() != ParamState::sharded) continue;
    while (!in_flight.empty() && elements + x->numel() > cfg_.allgather_bucket_size) {
      in_flight.front()->wait_gather();
      elements -= in_flight.front()->numel();
      in_flight.pop_front();
    }
    x->start_gather();
    in_flight.push_back(x);
    elements += x->numel();
  }
  for (ScheduledUnit* x : in_flight) x->wait_gather();
}

int64_t ZeroScheduler::live_numel() const {
  int64_t n = 0;
  for (const ScheduledUnit* x : units_)
    if (!x->persistent() && x->state() != ParamState::sharded) n += x->numel();
  return n;
}

}  // namespace zt
