#include "runtime/zero/unit_group.hpp"

#include <algorithm>
#include <stdexcept>

namespace zt {

UnitGroup::UnitGroup(std::vector<ScheduledUnit*> members) : members_(std::move(members)) {
  if (members_.empty()) throw std::logic_error("UnitGroup: no members");
}

int64_t UnitGroup::numel() const {
  int64_t all = 0, moving = 0;
  for (const ScheduledUnit* x : members_) {
    all += x->numel();
    if (!x->persistent()) moving += x->numel();
  }
  return moving ? moving : all;
}

bool UnitGroup::persistent() const {
  return std::all_of(members_.begin(), members_.end(), [](const ScheduledUnit* x) { return x->persistent(); });
}

ParamState UnitGroup::state() const {
  ParamState s = ParamState::gathered;
  for (const ScheduledUnit* x : members_) {
    if (x->state() == ParamState::sharded) return ParamState::sharded;
    if (x->state() == ParamState::gathering) s = ParamState::gathering;
  }
  return s;
}

void UnitGroup::start_gather() {
  for (ScheduledUnit* x : members_)
    if (x->state() == ParamState::sharded) x->start_gather();
}

bool UnitGroup::gather_done() {
  bool done = true;
  for (ScheduledUnit* x : members_) done = x->gather_done() && done;
  return done;
}

void UnitGroup::wait_gather() {
  for (ScheduledUnit* x : members_) x->wait_gather();
}

void UnitGroup::release() {
  for (ScheduledUnit* x : members_)
    if (x->state() == ParamState::gathered) x->release();  // kept members stay
}

void UnitGroup::prefetch_shard() {
  for (ScheduledUnit* x : members_)
    if (x->state() == ParamState::sharded) x->prefetch_shard();
}

void UnitGroup::prepare_grads() {
  for (ScheduledUnit* x : members_) x->prepare_grads();
}

void UnitGroup::start_reduce(bool scatter) {
  for (ScheduledUnit* x : members_) x->start_reduce(scatter);
}

bool UnitGroup::reduce_done() {
  bool done = true;
  for (ScheduledUnit* x : members_) done = x->reduce_done() && done;
  return done;
}

void UnitGroup::wait_reduce() {
  for (ScheduledUnit* x : members_) x->wait_reduce();
}

bool UnitGroup::reducing() const {
  return std::any_of(members_.begin(), members_.end(), [](const ScheduledUnit* x) { return x->reducing(); });
}

std::vector<ScheduledUnit*> schedule_units(const std::vector<UnitLayout>& layout, const std::vector<ScheduledUnit*>& units,
                                           std::vector<std::unique_ptr<UnitGroup>>& groups) {
  std::vector<std::vector<ScheduledUnit*>> members;
  for (size_t u = 0; u < layout.size(); ++u) {
    const int with = layout[u].runs_with;
    if (with < 0) {
      if (members.size() != u) throw std::logic_error("schedule_units: model units must come before adapter units");
      members.push_back({units[u]});
    } else {
      members.at(size_t(with)).push_back(units[u]);
    }
  }
  std::vector<ScheduledUnit*> scheduled;
  for (std::vector<ScheduledUnit*>& m : members) {
    if (m.size() == 1) {
      scheduled.push_back(m.front());
      continue;
    }
    groups.push_back(std::make_unique<UnitGroup>(std::move(m)));
    scheduled.push_back(groups.back().get());
  }
  return scheduled;
}

}  // namespace zt
