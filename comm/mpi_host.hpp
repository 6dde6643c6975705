// A communicator over the host program's own MPI communicator, for the embedding API
// (runtime/api/): a simulation or pipeline that runs under MPI already hands ztrain any
// communicator of its ranks. Only sources built with MPI include this header (it includes <mpi.h>).
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/communicator.hpp"

namespace zt {

// Collective over `host`: a communicator over a duplicate of it, so that ztrain's operations never
// match the host's own. CommError where MPI is not initialized (or finalized already), where it
// runs below MPI_THREAD_MULTIPLE, or for MPI_COMM_NULL. `host` stays the caller's.
std::unique_ptr<Communicator> adopt_mpi_communicator(MPI_Comm host);

}  // namespace zt
