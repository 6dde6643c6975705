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
// Each ring has a tag of its own (rings are numbered in issue order, the same on every rank): two
// rings in flight at once between the same neighbours would otherwise match each other's
// messages, since a rank may post its receive for the second ring's first step before the one for
// the first ring's second step.
#pragma once

#include <memory>

#include "comm/mpi_progress.hpp"
#include "tensor/tensor.hpp"

namespace zt::mpi {

// Starts the ring: in holds size * c floats, out c (it may be in's own chunk `rank`: it is
// written only after the last read of in); both stay alive and untouched until the operation
// completes. scratch holds 2c floats. Needs size > 1 and c > 0.
std::unique_ptr<Pending> start_ring_reduce_scatter(MPI_Comm comm, int rank, int size, int tag, const float* in,
                                                   float* out, int c, ReduceOp op, std::shared_ptr<Tensor> scratch);

// Tags of ring messages: kRingTagBase + (ring number % kRingTags), within the MPI_TAG_UB every MPI
// library offers (32767).
inline constexpr int kRingTagBase = 8192;
inline constexpr int kRingTags = 16384;

}  // namespace zt::mpi
