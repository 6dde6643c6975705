// NcclCommunicator: collectives over device buffers on NCCL, issued on a stream the communicator
// owns, so they overlap with compute.
//
// [Note: NCCL stream ordering] A collective starts after the work enqueued on the device's legacy
// default stream (stream 0) before the call, so a buffer produced there is complete; it does not
// hold that stream back, so compute issued after the call overlaps it. Buffers written on other
// streams must be synchronized by the caller first. Work::wait() blocks the host until the
// collective finished; work enqueued after wait() returns sees its results.
//
// Built where NCCL is found (ZT_HAVE_NCCL), else comm/nccl_absent.cpp throws CommError saying so;
// nothing here includes a CUDA or NCCL header.
#pragma once

#include <memory>

#include "comm/communicator.hpp"

namespace zt {

// Collective over `bootstrap` (an MPI communicator, or Self for one rank): rank 0 creates the NCCL
// unique id and broadcasts it over `bootstrap`; every rank makes device local_rank() % device count
// current for its thread (where the process's tensors then live) and joins. rank, size,
// local_rank and local_size are bootstrap's. Throws CommError naming the rank when there is no
// device or NCCL fails.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap);

}  // namespace zt
