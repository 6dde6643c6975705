// DeepSpeed's `aio` section: how the io_uring engine ([Note: io engine] in offload/io_engine.hpp)
// moves data. Its own header so that the config can hold it without the engine.
#pragma once

#include <cstdint>

namespace zt {

struct AioConfig {
  int64_t block_size = 1 << 20;  // bytes per request
  int queue_depth = 8;           // requests in flight per ring
  int intra_op_parallelism = 1;  // rings (each with its thread) one transfer is spread over
  bool single_submit = false;    // one submit call per request instead of one per batch
  bool overlap_events = true;    // refill the queue as completions arrive, not in waves
};

}  // namespace zt
