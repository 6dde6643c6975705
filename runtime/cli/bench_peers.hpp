// `ztrain bench --peers` and `--plot`: the Python side of the bench, launched as processes of their
// own, never linked in.
//
// [Note: bench peers] The peers are the same model, batch and ranks under PyTorch (DDP, FSDP2's
// fully_shard) and DeepSpeed ZeRO stages 0-3, on gloo CPU ranks: bench/peers_step.py under
// torchrun, from the Python of scripts/install-peers.sh's environment (or --python). Rank 0 starts
// them once the sweep is done, one at a time, with the threads a rank of ztrain had; the other
// ranks wait in a barrier polled every 50 ms (no progress thread spinning on a core the peers need).
// A peer that fails is a row saying why (its last lines of output), not the end of the bench.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/cli/bench.hpp"
#include "runtime/config.hpp"

namespace zt {

// On rank 0 only: one row per peer for `cfg`'s model and batch on `world` ranks of `threads`
// threads, each timed over `steps` steps after `warmup` (no MFU: the caller knows the model's FLOPs).
std::vector<BenchRow> run_peers(const Config& cfg, int world, int warmup, int steps, const std::string& python,
                                int threads);

// Every rank: a barrier that sleeps between polls ([Note: bench peers]).
void wait_for_ranks(Communicator& world);

// On rank 0 only: bench/bench_plot.py draws `json` (bench_json's) as a PNG at `png`; throws
// std::runtime_error with its output when it cannot (no matplotlib, an unwritable path).
void plot_bench(const std::string& json, const std::string& png, const std::string& python);
// `ztrain train --plot`: the same script draws a metrics file's loss and validation loss.
void plot_metrics(const std::string& metrics, const std::string& png);

// The Python the peers and the plot run on: `python` if given, else the environment of
// scripts/install-peers.sh ($ZTRAIN_PEERS, or ~/.cache/ztrain-peers).
std::string bench_python(const std::string& python);

}  // namespace zt
