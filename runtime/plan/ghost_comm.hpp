// The communicator of a ghost step's units: a group of ranks on the meta device, moving nothing.
// [Note: the ghost communicator]
//
// [Note: the ghost communicator] A ghost step (ghost_step.hpp) runs one rank standing for every
// rank: data parallel, each holds and sends what the others do, so a shard's sizes are the ones
// the real run uses. Its units are the engine's own ShardedUnits, and they need a communicator:
// this one has the group's size, is rank 0 of it, keeps its buffers on the meta device
// (memory()), checks each collective's shapes and counts its bytes as every communicator does
// ([Note: bytes sent]), and moves nothing. With a GhostClock each collective joins its group's
// queue on the clock (named by its unit, name_buffers) and completes when the clock says; without
// one a gather completes when first tested and a reduction only when waited for: the bound the
// estimate reports ([Note: memory estimate] in estimate.hpp).
// Beside the caller's buffers it holds, on the ledger, what MpiCommunicator holds for a group
// spanning hosts (comm/mpi_communicator.cpp): f32 staging from a pool (first fit, kept) for
// 16-bit reductions (a reduce-scatter's input and this rank's slice, an all-reduce's input and
// output) and for large all-reduces (kLargeAllReduceBytes: the ring's padded copy over 2-3 ranks,
// ring_all_reduce, else an in-place f32 one's input), and the ring's buffer of twice the chunk
// that reduce-scatters and ring all-reduces share, kept and grown (the new one made before the old
// one goes). A group on one host uses the shared-memory channel, whose buffers lie outside the
// ledger ([Note: shared-memory collectives] in comm/shm_channel.hpp).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/plan/ghost_step.hpp"
#include "tensor/meta_allocator.hpp"

namespace zt {

class GhostCommunicator final : public Communicator {
 public:
  // `size` ranks of group `group`, all on one host or not; `memory` and `clock` (null: none)
  // outlive it.
  GhostCommunicator(int size, bool one_host, GhostGroup group, MetaAllocator& memory, GhostClock* clock);

  int rank() const override { return 0; }
  int size() const override { return size_; }
  int local_rank() const override { return 0; }
  int local_size() const override { return one_host_ ? size_ : 1; }
  std::string_view backend() const override { return "ghost"; }
  Allocator& memory() const override { return memory_; }
  std::unique_ptr<Communicator> split(int color, int key) override;

  // The name collectives over `t`'s storage carry on the clock: its unit's. Shared by every
  // communicator made with `names`.
  using Names = std::map<const Storage*, std::string>;
  void set_names(std::shared_ptr<Names> names) { names_ = std::move(names); }

 protected:
  WorkPtr start_all_gather(const Tensor& in, const Tensor& out) override;
  WorkPtr start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override;
  WorkPtr start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) override;
  WorkPtr start_broadcast(const Tensor& buf, int root) override;
  WorkPtr start_barrier() override;

 private:
  class Pool;
  // A collective of `kind` over `buf` (nccl-tests' size), holding `staging` f32 elements from the
  // pool until it completes; `done_when_tested` without a clock.
  WorkPtr issue(TraceLane kind, const Tensor& buf, int64_t staging, bool done_when_tested);
  void grow_ring(int64_t chunk);
  std::string name_of(TraceLane kind, const Tensor& buf) const;

  int size_;
  bool one_host_;
  GhostGroup group_;
  MetaAllocator& memory_;
  GhostClock* clock_;
  std::shared_ptr<Pool> pool_;
  int64_t ring_ = 0;  // the ring's buffer, f32 elements
  std::shared_ptr<Names> names_;
};

}  // namespace zt
