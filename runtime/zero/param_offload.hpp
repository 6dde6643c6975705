// ParamOffload: this rank's stage-3 parameter shards kept in a SwapStore, host memory or NVMe, and
// brought back ahead of their units' all-gathers. [Note: parameter offload]
//
// [Note: parameter offload] ZeRO-Infinity's parameter side (offload_param, stage 3). The shard a
// unit all-gathers from (its 16-bit shard; in fp32 its master, which is also AdamW's) is one record
// of the store. It is here only:
// - from a fetch (the scheduler asks for the shards of the units it will gather next, up to
//   buffer_count units and buffer_count x buffer_size elements ahead) until its gather completed;
// - from the start of its unit's update until the updated shard is written back (at most
//   buffer_count writes wait at a time, so an update holds that many shards beyond its own);
// - and beyond either while the shards kept here stay within max_in_cpu elements (a host cache in
//   front of NVMe; device cpu keeps nothing beyond: its store is host memory already).
// A shard is read straight into its tensor (page aligned, [Note: host alignment]); one under a
// page goes through a bounce buffer. Persistent units and stages 0-2 keep their parameters.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "offload/io_engine.hpp"
#include "offload/swap_store.hpp"
#include "runtime/config.hpp"
#include "runtime/trace.hpp"

namespace zt {

class ShardedUnit;

class ParamOffload {
 public:
  // `units` outlive this; those built with param offload take part, their shards records of
  // `store`: host memory for device cpu, NVMe (params.swp) for nvme, or a ghost step's on the meta
  // device (make_meta_store).
  ParamOffload(std::vector<ShardedUnit>& units, const OffloadConfig& cfg, std::unique_ptr<SwapStore> store);
  ~ParamOffload();

  // Starts bringing unit u's shard here unless it is here or coming.
  void fetch(int u);
  // Unit u's shard is here, its read complete (fetched now if it was not coming).
  void ready(int u);
  // Unit u's gather has taken the shard: freed unless the cache keeps it.
  void done_with(int u);
  // Unit u's shard is about to be overwritten whole (its update): room for it, no read.
  void make_room(int u);
  // Unit u's shard changed (init, update): written back; kept or freed once written. At most
  // buffer_count writes wait; beyond that the oldest is waited for (and its shard freed).
  void store(int u);
  // Waits for the writes in flight, freeing their shards.
  void flush();

  bool here(int u) const { return state_.at(u) != Where::away; }
  void set_trace(Trace* t) { trace_ = t; }
  std::string where() const { return store_->where(); }

 private:
  enum class Where { away, reading, here, writing };
  Tensor shard(int u) const;
  void complete(int u);  // waits for u's transfer and settles its state
  void evict(int u);
  void retire();  // the oldest write: waited for, its shard freed

  std::vector<ShardedUnit>& units_;
  OffloadConfig cfg_;
  std::unique_ptr<SwapStore> store_;
  std::vector<int> record_;  // by unit; -1: not offloaded
  std::vector<Where> state_;
  std::vector<SwapOp> ops_;  // by unit: its transfer in flight
  std::vector<IoTransferPtr> ios_;
  std::vector<char> keep_;   // by unit: the cache holds it
  std::deque<int> writing_;  // units whose write was issued, oldest first
  PinnedBuffer bounce_;      // for shards under a page
  Trace* trace_ = nullptr;
};

}  // namespace zt
