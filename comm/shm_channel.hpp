// MpiCommunicator's collectives among ranks of one host, through a shared-memory segment instead
// of MPI messages. Internal to comm/.
//
// [Note: shared-memory collectives] Open MPI's collectives over shared memory reached 5-17% of the
// memcpy rate here (bench/RESULTS.md): its nonblocking all-gather and all-reduce are general
// algorithms of point-to-point messages, each message a copy through the transport, and one rank
// of each pair does a reduction's work. A communicator whose ranks all share one host instead maps
// one POSIX shared-memory segment (rank 0 makes it, the others map it by name, and it is unlinked
// once everyone has), holding a slot per rank: two counters (`published`, `done`) on cache lines
// of their own and two buffers of `n` regions of kShmChunk bytes. Every collective is a sequence
// of steps; in step g each rank
//   1. waits until every rank has finished step g-2 (done >= g-1), whose buffer (g % 2) it reuses;
//   2. writes its part into its buffer g % 2 (produce) and sets published = g+1 (release);
//   3. waits until every rank has published g+1 (acquire) and reads what it needs from the peers'
//      buffers (consume), then sets done = g+1.
// A step moves kShmChunk bytes a region, so the buffers stay in cache and the peers' writes are
// read from it, while the next step's are written into the other buffer. Reductions are split as
// NCCL's ring splits them: every rank reduces its own block (its reduce-scatter shard, its
// n-th of an all-reduce) from the peers' regions, in rank order, accumulating 16-bit floats in f32
// and rounding once; an all-reduce then all-gathers the blocks. Each element is computed by one
// rank, so every rank holds the same bits. In place costs no more than out of place. (An
// all-gather alone stays Open MPI's: its transport copies once, straight from the peer's buffer
// (CMA), where the channel copies in and out.)
// Operations run one at a time in the order they were started (the same on every rank); a step
// that must wait returns from advance(), so the communicator's deadline holds ([Note: no blocking
// MPI call]). Counters only grow, across operations, so no reset is ever needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/mpi_progress.hpp"
#include "tensor/dtype.hpp"

namespace zt::mpi {

// Bytes a step moves per region: small enough that a step's buffers stay in cache.
inline constexpr size_t kShmChunk = size_t{256} << 10;

class ShmChannel;

// Collective over `comm`, whose `size` ranks share this host. Null on every rank (they agree)
// where the segment cannot be made or mapped (no /dev/shm, or no room in it).
std::shared_ptr<ShmChannel> make_shm_channel(MPI_Comm comm, int rank, int size);

// The collectives of [Note: collective shapes] (comm/communicator.hpp) on raw buffers, counts in
// elements of `t`; reductions of f32, bf16, f16 (in f32) and i32. Each returns the operation, which
// waits for its turn within advance(); the buffers stay alive and untouched until it completed.
std::unique_ptr<Pending> shm_reduce_scatter(std::shared_ptr<ShmChannel> ch, const void* in, void* out, int64_t c,
                                            DType t, ReduceOp op);
std::unique_ptr<Pending> shm_all_reduce(std::shared_ptr<ShmChannel> ch, const void* in, void* out, int64_t n, DType t,
                                        ReduceOp op);
std::unique_ptr<Pending> shm_broadcast(std::shared_ptr<ShmChannel> ch, void* buf, int64_t n, DType t, int root);
std::unique_ptr<Pending> shm_barrier(std::shared_ptr<ShmChannel> ch);

}  // namespace zt::mpi
