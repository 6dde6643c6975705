// The embedding API's trainer (include/ztrain/ztrain.h) on the C++ side: the handle behind
// zt_trainer, and the two ways one is made. zt_trainer_create and friends read the config and
// build a communicator of their own over the host's (runtime/api/host_comm_*.cpp); the CLI's
// `train` hands over the Config its flags made and the job's world, then drives the trainer through
// the C calls like any host (one path, not two).
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>

#include "comm/communicator.hpp"
#include "runtime/config.hpp"
#include "ztrain/ztrain.h"

namespace zt::api {

// What this build cannot do (ZT_ERR_UNSUPPORTED).
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Collective over the communicator `make_comm` returns: reads `config` (a path or JSON text; the
// ranks agree on reading it), then builds the trainer. The status of the first failure, its message
// for zt_last_error.
zt_status create_trainer(const char* config, const std::function<std::unique_ptr<Communicator>()>& make_comm,
                         zt_trainer** out);
// Collective over `comm`, which the caller keeps alive until zt_trainer_destroy.
zt_status create_trainer(const Config& cfg, Communicator& comm, zt_trainer** out);

}  // namespace zt::api
