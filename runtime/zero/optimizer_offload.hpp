// OptimizerOffload: this rank's AdamW states (m, v, and the fp32 master where it is a buffer of its
// own) kept in a SwapStore, host memory or NVMe, and the update streamed through them.
// [Note: optimizer offload]
//
// [Note: optimizer offload] ZeRO-Offload / ZeRO-Infinity's optimizer side. Each unit's master
// range [0, M) is cut into sub-groups of at most sub_group_size elements; a sub-group's states
// are one record, [master | m | v] (or [m | v] where the master is the fp32 parameters
// themselves), moved with one I/O. The update walks the sub-groups in order:
// - host (device "cpu"): each record is updated where it lies;
// - nvme: through buffer_count buffers of the largest record: read sub-group k+1 (pipeline_read,
//   as far ahead as free buffers allow) while updating k while writing k-1 (pipeline_write; else
//   each write is waited for before the next update). A buffer is reused once its write completed.
// AdamW is elementwise, so updating by sub-groups gives the bits of the whole-buffer update:
// results are identical with offload none, cpu and nvme. Gradients stay where they are.
//
// [Note: update behind the next forward] The update cannot start before the backward ends (the
// clipping norm needs every gradient), and AdamW alone is too short to hide a step's I/O behind.
// So on NVMe (overlap_step) the engine returns from the update once it has begun, and the next
// forward carries it: units update in index order, which is the order the forward first uses
// them; a unit's gather first finishes that unit's part; the scheduler's polls at every unit
// boundary move the rest on (AdamW for sub-groups whose reads completed, their writes, further
// reads). A unit's gradients stay until its part is done (begin_step's zeroing waits). Nothing
// reads a unit's parameters before its gather, so the numbers are those of the update done at
// once; the I/O now overlaps forward compute.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "offload/aio_config.hpp"
#include "offload/io_engine.hpp"
#include "offload/swap_store.hpp"
#include "runtime/config.hpp"
#include "runtime/trace.hpp"
#include "runtime/zero/sharded_unit.hpp"

namespace zt {

class OptimizerOffload {
 public:
  // `units` (built with offload_states) outlive this; their states are records of `store`: host
  // memory for device cpu, NVMe (optimizer.swp) for nvme, or a ghost step's (make_meta_store).
  // Device nvme updates through buffer_count pinned buffers registered with `io`, which outlives
  // this, or, for a plan on the meta device, buffers of `plan` (charged there, holding nothing).
  OptimizerOffload(std::vector<ShardedUnit>& units, const ZeroConfig& zero, std::unique_ptr<SwapStore> store,
                   IoEngine* io, Allocator* plan = nullptr);
  ~OptimizerOffload();

  // After unit u's full_params_written(): its master goes to the store, m and v start at zero.
  void store_initial(int u);
  // AdamW over every unit's sub-groups, each unit between its begin_update() and finish_update().
  void update(float lr, float grad_scale, int t);

  // [Note: update behind the next forward]: with nvme, the update may instead run in the
  // background of what follows: begin() starts it (every unit's update pending), poll() moves it on without
  // waiting (reads completed: AdamW and the write; buffers freed: more reads), finish_unit(u)
  // completes it up to unit u (units update in index order, the forward's order of first use), and
  // finish() completes it all. Device cpu has no I/O to hide: update() only.
  bool can_defer() const { return nvme_; }
  void begin(float lr, float grad_scale, int t);
  void poll();
  void finish_unit(int u);
  void finish();
  bool active() const;  // an update began and has not finished

  // Unit u's states sub-group by sub-group, in order: `fn(begin, n, master, m, v)` (master null
  // where it is not offloaded) reads them (save) or, with `load`, fills them, and they are stored.
  // On NVMe the reads run ahead of fn and the writes behind it, through every buffer. No update
  // may be running.
  using GroupVisitor = std::function<void(int64_t, int64_t, float*, float*, float*)>;
  void visit_unit(int u, bool load, const GroupVisitor& fn);
  // The same over every unit's sub-groups in unit order: fn(unit, begin, n, master, m, v).
  using UnitGroupVisitor = std::function<void(int, int64_t, int64_t, float*, float*, float*)>;
  void visit_all(bool load, const UnitGroupVisitor& fn);

  void set_trace(Trace* t) { trace_ = t; }
  // Where the states are, for the log: "host memory", or the swap file's path.
  std::string where() const { return store_->where(); }

 private:
  struct Group {
    int unit;
    int64_t begin, end;  // master elements
    size_t record;
  };
  // The record's arrays at `base`: master (null where the unit's master is not offloaded), m, v.
  void arrays(const Group& g, char* base, float*& master, float*& m, float*& v) const;
  void update_group(const Group& g, char* base, float lr, float grad_scale, int t);
  void visit_groups(size_t first, size_t last, bool load, const UnitGroupVisitor& fn);
  bool advance(bool block);  // one step of the pipeline; whether anything moved
  void retire_write();       // the oldest write: waited for, its buffer free again

  std::vector<ShardedUnit>& units_;
  OffloadConfig cfg_;
  std::vector<Group> groups_;
  bool nvme_;
  std::vector<char*> buffers_;         // nvme only: each buffer's memory, in pinned_ or planned_
  std::vector<PinnedBuffer> pinned_;   // a run's
  std::vector<Tensor> planned_;        // a plan's
  std::unique_ptr<SwapStore> store_;
  MemCategory category_ = MemCategory::optimizer;
  Trace* trace_ = nullptr;

  // The update in progress (nvme).
  struct Pending {
    size_t group;
    int buffer;
    SwapOp op;
    IoTransferPtr io;  // for the trace, kept past the op's completion
  };
  float lr_ = 0, grad_scale_ = 0;
  int t_ = 0;
  size_t next_read_ = 0, next_update_ = 0;  // groups read (or reading), groups updated
  std::deque<int> free_;
  std::deque<Pending> reads_, writes_;
};

// This rank's swap folder below nvme_path, "<job>/rank<r>", with a job name the same on every rank
// of the run (collective: rank 0 names it).
std::string offload_swap_dir(Communicator& comm);

}  // namespace zt
