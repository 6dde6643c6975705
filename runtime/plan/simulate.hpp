// `ztrain simulate`: what one training step costs on a cluster that is not here: step time, the
// communication compute does not hide, memory per rank and MFU, from a training config, a world
// size and a cluster description (runtime/plan/cluster.hpp). [Note: step simulation]
//
// [Note: step simulation] The simulator runs the step the estimate runs (runtime/plan/
// ghost_step.hpp: the model's own forward and backward on the meta device, the real ZeroScheduler
// over the engine's own units and offloads on the meta device) with a clock. Each op the model
// calls advances the compute clock by its roofline time on the cluster's device, max(flops /
// (flops/s x the op class's efficiency), bytes / (memory bandwidth x the memory efficiency))
// ([Note: op costs] in kernels/op_cost.hpp); the flat-buffer work the units do on the meta device
// (zeroing the gradients, the norm's read, casts, accumulation, AdamW) is memory-bound work of
// the bytes it touches. Each collective a unit starts on its ghost communicator ([Note: the ghost
// communicator] in runtime/plan/ghost_comm.hpp) takes [Note: collective cost] (runtime/plan/
// cluster.hpp) over the group's shape on the nodes. With async progress it joins its
// communicator's queue (one per group: the world, the shard group, the replicas, hpZ's secondary
// group; a communicator runs its operations one at a time, in order, as the MPI and NCCL backends
// do), starting when the queue is free; where the scheduler waits for a gather or a reduction
// the compute clock waits for its completion, and where it only tests, the collective is done if
// the clock has passed its end. With polled progress (a host whose compute threads take every
// core) every collective in flight runs on the compute clock at the next unit boundary or wait,
// in issue order, as the scheduler's tests advance them there. So prefetch windows, bucket limits, persistence, the order of the
// queues and hybrid sharding's two-part reductions act as they do in a run. The step simulated
// is the second (the first records the schedule), every rank alike (data parallel: every rank
// runs the same step on its own micro-batches). Exposed communication is the time compute waited
// for collectives or, polled, spent running them.
// Memory is the ghost step's ledger peak under the simulated completions, in the layout the
// config's device computes in (train.device cuda with bf16: 16-bit parameters, gradients and
// activations, [Note: compute in 16 bits]; else f32). Not modelled: contention between compute
// and communication for the same cores or memory, stragglers, kernel launches; the host's own
// work a step (the data, the loss) only as the cluster's device.step_overhead.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "kernels/op_cost.hpp"
#include "runtime/config.hpp"
#include "runtime/plan/cluster.hpp"

namespace zt {

struct SimulatedSpan {
  TraceLane lane;
  std::string name;
  double begin, end;  // seconds from the step's start
};

struct Simulation {
  int world = 1, stage = 0;
  std::string sharding;  // e.g. "FULL_SHARD (stage 3)", "HYBRID_SHARD: 4 groups of 8"
  double step_s = 0;
  double compute_s = 0;  // the compute stream's busy time
  double exposed_s = 0;  // compute waiting for communication
  std::array<double, 3> comm_s{};  // busy time per queue kind: all_gather, reduce_scatter, all_reduce
  // Bytes this rank sends in the step within and across groups, as the communicator counts them
  // ([Note: bytes sent] in comm/communicator.hpp) and the metrics report them.
  uint64_t comm_bytes_intra = 0, comm_bytes_inter = 0;
  std::array<double, kOpClasses> op_class_s{};  // compute by op class; flat work counts as memory
  std::map<std::string, double> flat_work_s;  // of which the engine's own work, by kind ("adamw", "zero", ...)
  double tokens_per_step = 0;  // per rank
  double model_flops = 0;      // per rank per step, Model::flops_per_token (no recompute)
  double executed_flops = 0;   // per rank per step, what the ops report ([Note: op costs]), recompute included
  // [Note: MFU and HFU] MFU is the model's flops by formula (llm.c's and PaLM's convention: 6 a
  // parameter a token, every parameter, plus attention's products) over the step's time at the
  // device's peak; HFU the flops the step's ops execute (GEMMs and attention, causal halves,
  // recompute included) over the same. HFU cannot pass 100%: every op takes at least its flops at
  // the peak (efficiencies are at most 1). MFU can, on a small model: the formula's 6 a parameter
  // counts parameters that multiply nothing (GPT-2's position table is a lookup; norms and biases
  // add), which a 124M model's 0.6% hides and a 130k-parameter one's 11% does not. Both are
  // reported, as Megatron and PaLM report them; neither is capped, since a capped number would
  // hide where the formula and the ops part.
  double tokens_per_s_per_device = 0, mfu = 0, hfu = 0;
  size_t peak_bytes = 0;  // per rank
  std::vector<SimulatedSpan> spans;
};

// One steady-state step of `cfg` (its zero_optimization.stage) over `world` ranks on `cluster`,
// ranks filling nodes in order. ConfigError for settings the run would reject.
Simulation simulate_step(const Config& cfg, int world, const Cluster& cluster);

std::string format_simulation(const Config& cfg, const Cluster& cluster, const Simulation& s);
std::string simulation_json(const Simulation& s);
// The step as a Chrome trace ([Note: trace clocks] in runtime/trace.hpp has the format) at
// `path`, rank 0's lanes named as a real run's.
void write_simulated_trace(const Simulation& s, const std::string& path);

}  // namespace zt
