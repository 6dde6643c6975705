// The embedding API's constructor for a Fortran communicator in a build without MPI: there is
// none to take (zt_trainer_create_local is the way in).
#include <stdexcept>

#include "comm/communicator.hpp"
#include "runtime/api/trainer_handle.hpp"

extern "C" ZT_API zt_status zt_trainer_create_f(const char* config, int32_t, zt_trainer** out) {
  return zt::api::create_trainer(config, []() -> std::unique_ptr<zt::Communicator> {
    throw zt::api::Unsupported("this ztrain was built without MPI: zt_trainer_create_f has no communicator to take "
                        "(zt_trainer_create_local trains in one process)");
  }, out);
}
