// The files a training run writes, checked before its first step. [Note: outputs checked first]
//
// [Note: outputs checked first] A path that cannot be written must cost seconds, not the run: a
// model saved at the end into a missing folder, onto a read-only file system or over a folder was
// lost after every step had run. So before the first step rank 0, which writes them, checks
// train.save_model and train.trace (written whole at the end, through a temporary file beside
// them: [Note: replacing a file] in runtime/file_io.hpp) by creating their folders and a
// temporary file there, and refusing a target that exists and is not a regular file; and
// train.metrics (written line by line in place) by creating its folder and opening it for writing
// without truncating it (a FIFO or a device such as /dev/null is taken as given). No two outputs
// may name the same file, and none may take a name ztrain manages in a checkpoint folder
// (checkpoint.dir's `latest` and step_<k> folders, or the checkpoint resumed from). The checkpoint
// folder itself: CheckpointRoot (runtime/checkpoint/checkpoint_root.hpp). Errors name the key, the path and
// the reason.
#pragma once

#include "comm/communicator.hpp"
#include "runtime/config.hpp"

namespace zt {

// Collective: every rank calls it; every rank throws when a check fails on rank 0.
void check_outputs(const Config& cfg, Communicator& comm);

}  // namespace zt
