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
#pragma once

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
  // `units` (built with offload_states) outlive this. With device nvme the states go to
  // optimizer.swp in nvme_path/`swap_dir`, moved by `io`, which outlives this.
  OptimizerOffload(std::vector<ShardedUnit>& units, const ZeroConfig& zero, IoEngine* io, const std::string& swap_dir);
  ~OptimizerOffload();

  // After unit u's full_params_written(): its master goes to the store, m and v start at zero.
  void store_initial(int u);
  // AdamW over every unit's sub-groups, each unit between its begin_update() and finish_update().
  void update(float lr, float grad_scale, int t);

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
  void update_nvme(float lr, float grad_scale, int t);
  void trace_io(const char* what, const Group& g, const IoTransferPtr& io);

  std::vector<ShardedUnit>& units_;
  OffloadConfig cfg_;
  std::vector<Group> groups_;
  IoEngine* engine_ = nullptr;          // nvme only
  std::vector<PinnedBuffer> buffers_;  // nvme only
  std::unique_ptr<SwapStore> store_;
  MemCategory category_ = MemCategory::optimizer;
  Trace* trace_ = nullptr;
};

// This rank's swap folder below nvme_path, "<job>/rank<r>", with a job name the same on every rank
// of the run (collective: rank 0 names it).
std::string offload_swap_dir(Communicator& comm);

}  // namespace zt
