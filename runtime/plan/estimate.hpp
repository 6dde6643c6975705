// `ztrain estimate`: what one rank holds at the peak of a training step, by memory category, for
// ZeRO stages 0-3, computed without allocating the model. [Note: memory estimate]
//
// [Note: memory estimate] The estimate replays one steady-state step (the order of units already
// recorded, as from the second step on) on a ledger of its own, charging exactly what the runtime
// charges and when:
// - parameters, gradients, optimizer: what the engine's own ShardedUnits, OptimizerOffload and
//   ParamOffload allocate ([Note: ZeRO buffers] in runtime/zero/buffer_plan.hpp, at their padded
//   sizes, [Note: flat shards]), made on the meta device (runtime/plan/ghost_step.hpp): at stage 3
//   the gathered full parameters come and go as the runtime's own ZeroScheduler ([Note: ZeRO
//   schedule] in runtime/zero/scheduler.hpp) drives them: gathers, prefetch within
//   stage3_prefetch_bucket_size and stage3_max_live_parameters, releases; at stages 2-3 each
//   unit's full gradients exist from its pre-backward until its reduction finished; the offloads'
//   records and buffers are a store's on the meta device (make_meta_store).
// - activations: the model's own forward and backward, run on the meta device between the
//   scheduler's hooks ([Note: activations by the model's own code] in
//   runtime/plan/estimate_activations.hpp): what kernels/ops.cpp allocates (outputs and what backward
//   keeps, live until the producer's backward; activation gradients from their first consumer's
//   backward until their producer's, per tensor/tape.cpp) and what the CPU backend keeps
//   (attention's probabilities), the loss and the backward's seed.
//   With bf16/fp16 ([Note: mixed precision]) also the fp32 masters (with the optimizer), the
//   16-bit parameter shards, and the 16-bit buffers each gather fills and each reduction sends
//   while in flight; stages 1-3 gather their kept parameters after the update through the
//   scheduler's gather_kept.
// - communication: what the MPI communicator holds for each group spanning hosts, as the ghost
//   communicators hold it ([Note: the ghost communicator] in runtime/plan/ghost_comm.hpp): the f32
//   ring buffer (2 x the largest chunk, kept between operations), the pool of f32 staging buffers
//   for 16-bit reductions and large all-reduces (first fit, kept; hybrid sharding's all-reduces
//   over the replicas too), and the one-element all-reduces of the overflow flag, the norm and
//   the loss.
// - other: the step's token and target batches.
// Where the runtime's peak depends on when asynchronous collectives complete, the estimate is the
// bound the rules allow: every reduction stays in flight (holding its unit's full gradients) until
// reduce_bucket_size forces a wait, and a gather until the scheduler first tests it. (With MPI's
// polled progress a reduce-scatter completes where it starts, which is what the estimate with
// overlap_comm false gives.) Not counted: memory outside the accounting allocator (MPI's own
// buffers, the data loader, kernels' stack scratch). The host (MPI) backend.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_dims.hpp"
#include "runtime/config.hpp"
#include "tensor/allocator.hpp"

namespace zt {

struct StageEstimate {
  int stage = 0;
  std::array<size_t, kMemCategories> peak{};  // bytes per rank, each category's own peak
  size_t total = 0;      // peak of the sum, as MemSnapshot::total_peak (not the sum of the peaks)
  size_t deepspeed = 0;  // DeepSpeed's model-states number ([Note: DeepSpeed's estimate] in estimate.cpp)
  size_t peak_of(MemCategory c) const { return peak[static_cast<size_t>(c)]; }
};

struct MemoryEstimate {
  ModelDims dims;
  int world_size = 1;
  int64_t num_params = 0;    // without padding
  int64_t largest_unit = 0;  // parameters of the largest unit
  int64_t deepspeed_largest_layer = 0;  // DeepSpeed's "largest layer" (Model::deepspeed_largest_layer)
  std::vector<StageEstimate> stages;  // stages 0, 1, 2, 3
  int64_t trainable_params = 0;       // those not frozen (LoRA's adapters)
  // With frozen parameters: stage 3 under zero_optimization.frozen_params "sharded", then
  // "replicated" ([Note: frozen units] in runtime/zero/sharded_unit.hpp); empty without.
  std::vector<StageEstimate> frozen_policies;
  // The configured stage under each activation checkpointing mode ([Note: activation
  // checkpointing] in tensor/tape.hpp): none, full, selective op, selective by block (every the
  // configured k, else 2nd), each with its ActivationCheckpointing::describe().
  std::vector<std::pair<std::string, StageEstimate>> checkpointing_modes;
  std::string checkpointing;  // the configured mode's describe()
};

// Per-rank peaks of a step for every stage, with `cfg`'s model, batch and zero_optimization
// settings (its zero_optimization.stage is ignored: all four are estimated). Reads no data; with
// model.init_from, the checkpoint's dimensions. ConfigError for settings the run would reject.
// `ranks_per_host` (0: all on one host) decides hybrid sharding's default group.
MemoryEstimate estimate_memory(const Config& cfg, int world_size, int ranks_per_host = 0);

// One row per stage, a column per category, the total and DeepSpeed's number, with a header
// naming the inputs and a footer saying what the numbers are.
std::string format_estimate(const Config& cfg, const MemoryEstimate& e);
// The same numbers as one JSON object, bytes exact, keys as in the metrics file's peak_bytes.
std::string estimate_json(const MemoryEstimate& e);

}  // namespace zt
