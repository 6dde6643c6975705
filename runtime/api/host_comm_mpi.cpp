// The embedding API's constructors that take the host's MPI communicator (a build with MPI).
#include "comm/mpi_host.hpp"
#include "comm/communicator.hpp"
#include "runtime/api/trainer_handle.hpp"

extern "C" {

ZT_API zt_status zt_trainer_create(const char* config, MPI_Comm comm, zt_trainer** out) {
  return zt::api::create_trainer(config, [comm] {
    return comm == MPI_COMM_NULL ? zt::make_self_communicator() : zt::adopt_mpi_communicator(comm);
  }, out);
}

ZT_API zt_status zt_trainer_create_f(const char* config, int32_t fortran_comm, zt_trainer** out) {
  // MPI_Comm_f2c itself needs MPI started; adopt_mpi_communicator says so where it is not.
  int initialized = 0;
  MPI_Initialized(&initialized);
  return zt::api::create_trainer(config, [fortran_comm, initialized] {
    return zt::adopt_mpi_communicator(initialized ? MPI_Comm_f2c(fortran_comm) : MPI_COMM_NULL);
  }, out);
}

}  // extern "C"
