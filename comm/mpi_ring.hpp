// The f32 reduce-scatter of MpiCommunicator as a ring of point-to-point messages, advanced a step
// at a time without blocking ([Note: no blocking MPI call] in comm/mpi_progress.hpp). Internal to
// comm/.
//
// [Note: ring reduce-scatter] Open MPI's reduce_scatter_block reaches under 1 GB/s here (it
// reduces and then scatters), so f32 reduce-scatters run as a ring, as NCCL's do: in n-1 steps
// each rank passes a partly reduced chunk to its right neighbour and adds its own input to the one
// from its left, so rank r ends with chunk r reduced over all ranks, having sent (n-1)/n of the
// buffer. A step's MPI_Isend and MPI_Irecv are tested by the progress loop like any collective's
// request, so the ring overlaps the other operations in flight and its wait keeps its deadline.
//
// [Note: ring all-reduce] Open MPI's nonblocking all-reduce (libnbc) reduces to a root and
// broadcasts back on fewer than 4 ranks, and in place on any number: each link carries the whole
// buffer one way at a time while the other way idles, and one rank does all the reduction. Across
// hosts, where a hybrid run's replicas are pairs, that ran at half the link (bench/RESULTS.md). A
// large all-reduce over 2 or 3 ranks therefore runs as NCCL's ring all-reduce: the ring
// reduce-scatter above, then, within the same ring, n-1 steps of an all-gather in which each rank
// passes on the reduced chunk it received last (its own first), straight within the buffer. Over 4
// or more, out of place, Open MPI's own was faster across two hosts here (it crosses between
// the hosts less than a flat ring does), so it stays.
// A communicator's rings run one at a time, in issue order (the same on every rank), through one
// buffer kept between them: rings run side by side only compete for the same memory bandwidth,
// and fresh pages for every ring cost as much as the transfer itself. Each ring still has a tag of
// its own, so that no message can match another ring's receive.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/mpi_progress.hpp"
#include "tensor/tensor.hpp"

namespace zt::mpi {

// What the rings of one communicator share. Only the thread driving its progress touches it.
struct RingLane {
  uint64_t turn = 0;                   // the number of the ring that runs now
  std::shared_ptr<Tensor> buffer;      // 2 × the largest chunk so far, f32
};

// Ring number `number` of `lane`'s communicator (numbered in issue order from 0): in holds
// size * c floats, out c (it may be in's own chunk `rank`: it is written only after the last read
// of in); both stay alive and untouched until the operation completes. Needs size > 1 and c > 0.
// It waits for its turn within advance().
std::unique_ptr<Pending> start_ring_reduce_scatter(std::shared_ptr<RingLane> lane, uint64_t number, MPI_Comm comm,
                                                   int rank, int size, const float* in, float* out, int c, ReduceOp op);

// Ring all-reduce ([Note: ring all-reduce]) of `buf`, size * c floats, in place; `keep` holds the
// memory of `buf` (leaked with a send in flight when abandoned, as the lane's buffer is).
std::unique_ptr<Pending> start_ring_all_reduce(std::shared_ptr<RingLane> lane, uint64_t number, MPI_Comm comm, int rank,
                                               int size, std::shared_ptr<Tensor> keep, float* buf, int c, ReduceOp op);

}  // namespace zt::mpi
