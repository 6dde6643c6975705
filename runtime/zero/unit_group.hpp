// UnitGroup: a model unit and its adapter units ([Note: LoRA units] in models/lora.hpp) as the one
// unit the scheduler drives: they are gathered, released and reduced together, because the
// model's math reads them together, while each keeps its own flat buffers (a frozen unit's never
// enter a reduction or an update). The tape brackets the model's unit; its hooks reach the group.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.hpp"
#include "runtime/zero/scheduled_unit.hpp"

namespace zt {

class UnitGroup final : public ScheduledUnit {
 public:
  // The first member is the model's unit; the members outlive the group.
  explicit UnitGroup(std::vector<ScheduledUnit*> members);

  const std::string& name() const override { return members_.front()->name(); }
  // The elements a gather brings: the members that are not kept gathered (all, if every one is).
  int64_t numel() const override;
  // Only when every member is: a kept base with adapters that are not is still gathered (its
  // adapters) at each use.
  bool persistent() const override;
  // The least advanced member's: sharded while any is, gathering while any is.
  ParamState state() const override;

  void start_gather() override;
  bool gather_done() override;
  void wait_gather() override;
  void release() override;
  void prefetch_shard() override;
  void prepare_grads() override;
  void start_reduce(bool scatter) override;
  bool reduce_done() override;
  void wait_reduce() override;
  bool reducing() const override;

 private:
  std::vector<ScheduledUnit*> members_;
};

// What the scheduler drives for a model laid out as `layout`, whose units are `units` (one per
// layout unit, in its order): one entry per model unit (the tape's unit numbers), the unit itself
// or, where adapter units run with it, a UnitGroup kept in `groups`.
std::vector<ScheduledUnit*> schedule_units(const std::vector<UnitLayout>& layout, const std::vector<ScheduledUnit*>& units,
                                           std::vector<std::unique_ptr<UnitGroup>>& groups);

}  // namespace zt
