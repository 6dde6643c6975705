// ZeroScheduler: when each unit is gathered, released and reduced. It sits on the tape's unit hooks
// ([Note: unit hooks] in tensor/tape.hpp) and drives the ShardedUnits.
//
// [Note: ZeRO schedule] The first forward pass records the order in which units run; the pass's
// schedule is that order, then the same order reversed for backward (FSDP2's rule: backward
// prefetch is the reverse of the recorded forward order). A unit may run more than once in a pass
// (the tied embedding's units run in the embedding and again in the head).
// - pre-hook at position i: the unit is gathered (waited for), then the units of the next
//   positions are prefetched, in schedule order, as long as they add up to at most
//   stage3_prefetch_bucket_size elements and the gathered or in-flight units to at most
//   stage3_max_live_parameters. The running unit is gathered whatever the cap says.
// - post-hook at position i: the unit is released unless position i+1 runs it too, or it runs
//   again before more than stage3_max_reuse_distance elements of other units have run and the
//   gathered units are within stage3_max_live_parameters (stage 3; persistent units never are).
// - post-backward: the unit's reduction starts (every micro-batch at stages 2-3, the last one at
//   stages 0-1), at most reduce_bucket_size elements in flight, oldest waited first. Stages 0-1
//   keep full gradients, so a unit that runs more than once is reduced after its last backward;
//   stages 2-3 reduce after each, adding to the shard, so that no full gradients wait from the
//   head's backward to the embedding's (a unit's next backward waits for its reduction first).
// - with offload_param, the pre-hook also starts reading the shards of the next units to gather
//   ([Note: parameter offload]).
// - a unit may run forward again during backward, just before its own backward: activation
//   checkpointing recomputes a block there. Its pre-hook gathers it again (stage 3 released it
//   after the first forward), and its post-hook keeps it for the backward that follows; the
//   schedule's position does not move. A recompute is recognised once the pass's backward has
//   begun (its first backward hook: the head's, which is never recomputed).
// - every hook tests the collectives in flight, which also drives MPI in its polled mode.
// With overlap_comm false every collective is waited for where it starts.
#pragma once

#include <deque>
#include <functional>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/trace.hpp"
#include "runtime/zero/scheduled_unit.hpp"
#include "tensor/tape.hpp"

namespace zt {

class ZeroScheduler {
 public:
  // The units outlive the scheduler.
  ZeroScheduler(std::vector<ScheduledUnit*> units, const ZeroConfig& cfg);

  UnitHooks hooks();

  // Before each forward pass; `reduce` says whether this pass's backward reduces gradients
  // (always at stages 2-3, on the last micro-batch at stages 0-1).
  void begin_pass(bool reduce);
  // After a pass: waits for every reduction (stages 2-3 then hold this micro-batch in the shards)
  // and releases what stage 3 need not keep.
  void end_pass();
  // After an update: gathers the kept full parameters of every persistent unit again from the
  // updated shards (stages 1-3), at most allgather_bucket_size elements in flight, oldest waited
  // first; returns with all of them gathered. Stage 0 updates its full parameters in place.
  void gather_kept();
  // Tests the collectives in flight, and runs the background work (set_background).
  void poll();
  // Work moved on at every hook, e.g. an update running behind the forward.
  void set_background(std::function<void()> f) { background_ = std::move(f); }

  // Elements of non-persistent units gathered or being gathered (the live cap's measure).
  int64_t live_numel() const;

  // Records each unit's forward and backward on the compute lane (null: no trace).
  void set_trace(Trace* t) { trace_ = t; }

 private:
  void pre(int u, bool backward);
  void post(int u, bool backward);
  // Checks the unit against the schedule (the first pass records it); true for a recompute.
  bool record(int u, bool backward);
  void gather_now(int u);
  void prefetch();
  void prefetch_shards();
  void reduce(int u);
  int unit_at(size_t pos) const;  // the unit the schedule runs at pos; -1 past its end
  bool reused_soon(int u) const;

  std::vector<ScheduledUnit*> units_;
  ZeroConfig cfg_;
  int stage_;

  std::vector<int> order_;  // forward order, recorded by the first pass
  bool frozen_ = false;
  size_t pos_ = 0;          // position in the pass's schedule: forward order then its reverse
  bool reduce_ = false;
  int running_ = -1;               // the unit between its pre- and post-hook
  bool recomputing_ = false;       // running_ is a recompute during backward
  std::vector<int> writers_left_;  // backward runs still to come in this pass, per unit
  std::deque<int> reducing_;       // units whose reduction is in flight, oldest first
  Trace* trace_ = nullptr;
  std::function<void()> background_;
  Trace::clock::time_point compute_started_;  // units do not nest: one running at a time
};

}  // namespace zt
