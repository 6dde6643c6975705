#include "runtime/zero/scheduler.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace zt {

ZeroScheduler::ZeroScheduler(std::vector<ShardedUnit>& units, std::vector<std::vector<int>> borrowed,
                             const ZeroConfig& cfg)
    : units_(units),
      borrowed_(std::move(borrowed)),
      cfg_(cfg),
      stage_(cfg.stage),
      users_(units.size(), 0),
      writers_left_(units.size(), 0) {
  if (borrowed_.size() != units_.size()) throw std::invalid_argument("ZeroScheduler: one borrowed list per unit");
}

UnitHooks ZeroScheduler::hooks() {
  return {[this](int u) { pre(u, false); }, [this](int u) { post(u, false); }, [this](int u) { pre(u, true); },
          [this](int u) { post(u, true); }};
}

std::vector<int> ZeroScheduler::needs(int u) const {
  std::vector<int> n{u};
  n.insert(n.end(), borrowed_.at(u).begin(), borrowed_.at(u).end());
  return n;
}

int ZeroScheduler::unit_at(size_t pos) const {
  const size_t F = order_.size();
  return pos < F ? order_[pos] : pos < 2 * F ? order_[2 * F - 1 - pos] : -1;
}

bool ZeroScheduler::needed_at(int u, size_t pos) const {
  const int w = unit_at(pos);
  if (w < 0) return false;
  const auto& b = borrowed_[w];
  return w == u || std::find(b.begin(), b.end(), u) != b.end();
}

void ZeroScheduler::begin_pass(bool reduce) {
  if (!order_.empty()) frozen_ = true;
  pos_ = 0;
  reduce_ = reduce;
  std::fill(writers_left_.begin(), writers_left_.end(), 0);
  for (int u : order_)
    for (int v : needs(u)) ++writers_left_[v];
}

void ZeroScheduler::record(int u, bool backward) {
  const size_t F = order_.size();
  if (!frozen_) {
    if (!backward) {  // the first forward pass
      order_.push_back(u);
      return;
    }
    frozen_ = true;  // the first backward: the forward order is complete
    begin_pass(reduce_);
    pos_ = F;
  }
  const int want = unit_at(pos_);
  if (want != u)
    throw std::logic_error("ZeRO schedule: unit " + units_.at(u).name() + " ran at position " + std::to_string(pos_) +
                           " where the recorded order has " + (want < 0 ? std::string("none") : units_[want].name()));
}

void ZeroScheduler::gather_now(int u) {
  ShardedUnit& x = units_[u];
  if (x.state() == ParamState::sharded) x.start_gather();
  x.wait_gather();
}

void ZeroScheduler::pre(int u, bool backward) {
  poll();
  record(u, backward);
  for (int v : needs(u)) {
    gather_now(v);
    ++users_[v];
    if (backward) units_[v].prepare_grads();
  }
  prefetch();
  compute_started_ = Trace::clock::now();
}

void ZeroScheduler::post(int u, bool backward) {
  if (trace_)
    trace_->span(TraceLane::compute, (backward ? "backward " : "forward ") + units_[u].name(), compute_started_,
                 Trace::clock::now());
  const std::vector<int> n = needs(u);
  for (int v : n) --users_[v];
  if (backward && reduce_)
    for (int v : n)
      if (--writers_left_[v] == 0) reduce(v);
  for (int v : n) {
    ShardedUnit& x = units_[v];
    if (users_[v] == 0 && !x.persistent() && x.state() == ParamState::gathered && !(frozen_ && needed_at(v, pos_ + 1)))
      x.release();
  }
  ++pos_;
  poll();
}

void ZeroScheduler::prefetch() {
  if (stage_ < 3 || !frozen_) return;
  // Looks ahead over the units the next positions need and no running unit holds, each counted
  // once, until they add up to more than the prefetch bucket; gathers those not gathered yet.
  int64_t ahead = 0, live = live_numel();
  std::vector<char> counted(units_.size(), 0);
  for (size_t p = pos_ + 1; p < 2 * order_.size(); ++p) {
    for (int v : needs(unit_at(p))) {
      ShardedUnit& x = units_[v];
      if (x.persistent() || users_[v] > 0 || counted[v]) continue;
      counted[v] = 1;
      ahead += x.numel();
      if (ahead > cfg_.prefetch_bucket_size) return;
      if (x.state() != ParamState::sharded) continue;
      if (live + x.numel() > cfg_.max_live_parameters) return;
      x.start_gather();
      live += x.numel();
    }
  }
}

void ZeroScheduler::reduce(int u) {
  auto in_flight = [&] {
    int64_t n = 0;
    for (int v : reducing_) n += units_[v].numel();
    return n;
  };
  while (!reducing_.empty() && in_flight() + units_[u].numel() > cfg_.reduce_bucket_size) {
    units_[reducing_.front()].wait_reduce();
    reducing_.pop_front();
  }
  ShardedUnit& x = units_[u];
  x.start_reduce(cfg_.reduce_scatter);
  if (!cfg_.overlap_comm) x.wait_reduce();
  if (x.reducing()) reducing_.push_back(u);
}

void ZeroScheduler::poll() {
  for (auto it = reducing_.begin(); it != reducing_.end();)
    it = units_[*it].reduce_done() ? reducing_.erase(it) : it + 1;
  for (ShardedUnit& x : units_) x.gather_done();
}

void ZeroScheduler::end_pass() {
  for (int v : reducing_) units_[v].wait_reduce();
  reducing_.clear();
  for (ShardedUnit& x : units_) {
    x.wait_gather();
    if (!x.persistent() && x.state() == ParamState::gathered) x.release();
  }
  std::fill(users_.begin(), users_.end(), 0);
}

int64_t ZeroScheduler::live_numel() const {
  int64_t n = 0;
  for (const ShardedUnit& x : units_)
    if (!x.persistent() && x.state() != ParamState::sharded) n += x.numel();
  return n;
}

}  // namespace zt
