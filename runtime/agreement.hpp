// The ranks agree on the run before it starts.
//
// [Note: ranks agree on the run] Every rank reads its own config (its own file, its own --set), so
// nothing else makes them one run. The settings that decide the numbers or which collectives run
// must be equal on every rank: the model, the data and its order, the batch geometry, ZeRO and
// precision, the optimizer and its schedule, the seed, the steps, validation, checkpoints, the
// saved model and trace, resume and the device. A rank with another stage or layer count issues
// collectives of other shapes (a crash or a hang inside MPI); another lr or seed at stage 0 trains
// silently different replicas. What is a rank's own business may differ: threads, the collective
// timeout and progress mode, the metrics file, offload's paths and the aio engine's tuning. The
// settings are the rows of the keys' table not marked per_rank ([Note: one declaration per key]
// in runtime/config_keys.hpp), so a new key is agreed on unless its row says otherwise.
// The check is collective and runs first in the Trainer's constructor, before anything whose
// shape depends on the config (the NCCL bootstrap too), so an embedding program gets it as the
// CLI does. It costs one all-gather of a digest; only where digests differ do a digest per
// setting (to find the first that differs) and that setting's values (to name them) follow. Each
// is a blocking collective, bounded by the communicator's timeout.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/config.hpp"

namespace zt {

// Collective: every rank's words, rank by rank (each rank gives equally many).
std::vector<uint64_t> all_gather_words(Communicator& comm, const std::vector<uint64_t>& mine);

// The settings every rank must share, as (dotted config key, value as JSON), in the table's order.
std::vector<std::pair<std::string, std::string>> shared_settings(const Config& cfg);

// Collective over comm: returns once every rank has the same shared settings; otherwise throws
// ConfigError on every rank, naming the first setting that differs and each rank's value, e.g.
// "config: zero_optimization.stage: the ranks disagree: 2 on ranks 0-1, 3 on rank 2".
void agree_on_settings(const Config& cfg, Communicator& comm);

}  // namespace zt
