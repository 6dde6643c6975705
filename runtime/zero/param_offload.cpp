#include "runtime/zero/param_offload.hpp"

#include <algorithm>

#include "runtime/zero/sharded_unit.hpp"

namespace zt {

ParamOffload::ParamOffload(std::vector<ShardedUnit>& units, const OffloadConfig& cfg, std::unique_ptr<SwapStore> store)
    : units_(units), cfg_(cfg), store_(std::move(store)), record_(units.size(), -1), state_(units.size(), Where::here),
      ops_(units.size()), ios_(units.size()), keep_(units.size(), 0) {
  const bool nvme = cfg_.device == "nvme";
  int64_t cached = 0;  // elements the host cache holds
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    ShardedUnit& x = units_[u];
    if (!x.param_offloaded()) continue;
    const Tensor s = x.param_shard();
    record_[u] = static_cast<int>(store_->add(x.name() + " shard", s.nbytes()));
    state_[u] = s.has_data() ? Where::here : Where::away;
    // The cache in front of NVMe: the first units to fit stay here for good.
    if (nvme && cached + s.numel() <= cfg_.max_in_cpu) {
      keep_[u] = 1;
      cached += s.numel();
    }
    if (nvme && s.nbytes() < IoFile::kDirectAlignment && bounce_.size() == 0)
      bounce_ = PinnedBuffer(IoFile::kDirectAlignment, false);
  }
}

ParamOffload::~ParamOffload() = default;

Tensor ParamOffload::shard(int u) const { return units_[u].param_shard(); }

void ParamOffload::fetch(int u) {
  if (record_.at(u) < 0 || state_[u] != Where::away) return;
  const Tensor s = shard(u);
  s.storage()->materialize();
  // Host memory, or a plan's meta memory ([Note: the meta device]), which the store does not
  // touch: so its address, not raw()'s host access.
  const auto id = static_cast<size_t>(record_[u]);
  if (s.nbytes() < IoFile::kDirectAlignment && !store_->resident(id)) {  // under a page: bounce, at once
    store_->read(id, bounce_.data()).wait();
    s.allocator().copy(s.device_ptr(), bounce_.data(), s.nbytes());
    state_[u] = Where::here;
    return;
  }
  ops_[u] = store_->read(id, s.device_ptr());
  ios_[u] = ops_[u].transfer();
  state_[u] = Where::reading;
}

void ParamOffload::complete(int u) {
  ops_[u].wait();
  trace_transfer(trace_, (state_[u] == Where::reading ? "read " : "write ") + units_[u].name(), ios_[u]);
  ios_[u].reset();
  state_[u] = Where::here;
}

void ParamOffload::ready(int u) {
  if (record_.at(u) < 0) return;
  if (state_[u] == Where::away) fetch(u);
  if (state_[u] == Where::reading || state_[u] == Where::writing) complete(u);
}

void ParamOffload::evict(int u) {
  if (keep_[u] || state_[u] != Where::here) return;
  const Tensor s = shard(u);
  s.storage()->release();
  state_[u] = Where::away;
}

void ParamOffload::done_with(int u) {
  if (record_.at(u) >= 0) evict(u);
}

void ParamOffload::make_room(int u) {
  if (record_.at(u) < 0) return;
  if (state_[u] == Where::away) {
    shard(u).storage()->materialize();
    state_[u] = Where::here;
  }
  if (state_[u] != Where::here) complete(u);
}

void ParamOffload::store(int u) {
  if (record_.at(u) < 0) return;
  if (state_[u] != Where::here) complete(u);
  const Tensor s = shard(u);
  const auto id = static_cast<size_t>(record_[u]);
  if (s.nbytes() < IoFile::kDirectAlignment && !store_->resident(id)) {
    s.allocator().copy(bounce_.data(), s.device_ptr(), s.nbytes());
    store_->write(id, bounce_.data()).wait();
    evict(u);
    return;
  }
  ops_[u] = store_->write(id, s.device_ptr());
  ios_[u] = ops_[u].transfer();
  state_[u] = Where::writing;
  if (ops_[u].done()) {  // host memory: copied already
    state_[u] = Where::here;
    evict(u);
    return;
  }
  // At most buffer_count shards wait on their writes; the oldest is waited for and freed.
  writing_.push_back(u);
  while (static_cast<int>(writing_.size()) > cfg_.buffer_count) retire();
}

void ParamOffload::retire() {
  const int u = writing_.front();
  writing_.pop_front();
  if (state_[u] != Where::writing) return;  // a gather's ready() took it in the meantime
  complete(u);
  evict(u);
}

void ParamOffload::flush() {
  while (!writing_.empty()) retire();
}

}  // namespace zt
