// Activation checkpointing's policy: which blocks Model::forward runs through Tape::checkpoint,
// and how ([Note: activation checkpointing] in tensor/tape.hpp). The config's
// activation_checkpointing section (DeepSpeed's, with torchtitan's mode keys) fills it.
#pragma once

#include <string>

namespace zt {

struct ActivationCheckpointing {
  enum class Mode { none, full, selective_block, selective_op };
  Mode mode = Mode::none;
  // selective_block: the blocks l with (l + 1) % every == 0, torchtitan's count (every 1: all).
  int every = 1;
  // DeepSpeed's cpu_checkpointing: the kept block inputs wait in pinned host memory.
  bool cpu_checkpointing = false;

  bool enabled() const { return mode != Mode::none; }
  // Whether block `layer` is checkpointed.
  bool checkpoints(int layer) const;
  // For the banner and the estimate: "none", "full", "selective op", "selective every 2nd block".
  std::string describe() const;
};

}  // namespace zt
