// MpiCommunicator: collectives over host buffers on MPI-3 nonblocking collectives.
//
// [Note: MPI progress] Open MPI advances a nonblocking collective only inside MPI calls, so an
// MPI_Iallgather left alone while the caller computes does not move. Every MPI call of a
// communicator is therefore made by its progress thread: it starts queued operations in issue
// order and polls the outstanding ones with MPI_Test, sleeping on a condition variable when there
// is nothing in flight. The caller's thread only enqueues and waits. Between polls it yields, or
// sleeps ZT_MPI_POLL_US microseconds when that is set. ZT_MPI_PROGRESS=poll selects the other
// strategy: no thread, operations start in the caller and move only when a Work is tested or
// waited on (polling from the scheduler). bench/overlap compares the two (bench/RESULTS.md): on a
// machine with no idle core, polling from the scheduler hides more. In both modes an operation is
// made of nonblocking MPI calls only, so that its deadline holds ([Note: no blocking MPI call] in
// comm/mpi_progress.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/communicator.hpp"

namespace zt {

// A large all-reduce outside the shared-memory channel: at least this many bytes in f32 (f32, or
// 16 bits reduced in f32). Over 2 or 3 ranks it runs as a ring from a copy in the staging pool
// ([Note: ring all-reduce] in comm/mpi_ring.hpp); over more, an in-place f32 or i32 one reduces
// out of place from a copy, as Open MPI's in-place all-reduce across hosts runs at 0.4x its
// out-of-place one here (bench/RESULTS.md). Smaller ones (the step's one-value reductions) are
// MPI's, in place.
inline constexpr size_t kLargeAllReduceBytes = size_t{1} << 20;
// Whether an all-reduce of `n` elements over `ranks` runs as the ring.
inline bool ring_all_reduce(int ranks, int64_t n) {
  return ranks > 1 && ranks < 4 && static_cast<size_t>(n) * sizeof(float) >= kLargeAllReduceBytes;
}

// MPI_Init_thread(MPI_THREAD_MULTIPLE) and MPI_Finalize. One per process, before any MPI
// communicator and outliving them all.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

// Over a duplicate of MPI_COMM_WORLD.
std::unique_ptr<Communicator> make_mpi_communicator();

// Ends every rank of the job (MPI_Abort on MPI_COMM_WORLD).
[[noreturn]] void mpi_abort_job(int code);

}  // namespace zt
