// Whether a run can fit at all, known before anything is allocated. [Note: memory floor]
//
// [Note: memory floor] `ztrain estimate` replays a whole step, and its stage 2-3 gradients are
// the bound the schedule allows, so it may exceed what a run really takes; refusing runs on it
// could refuse runs that fit. The floor is the part of it no run can do without: the buffers of
// [Note: ZeRO buffers] that live through the whole step (full f32 parameters at stages 0-2, the
// f32 gradients or their shard, AdamW's m and v unless offloaded to NVMe), unpadded, with no
// activations, masters, 16-bit copies or communication. It is closed form, so an absurd model
// (n_embd 2,000,000: 48 trillion parameters) is refused in microseconds, where allocating it
// took seconds and gigabytes before failing.
#pragma once

#include <cstdint>

#include "runtime/config.hpp"

namespace zt {

// Bytes each of `world_size` ranks (`ranks_per_host` a host: hybrid sharding's default group)
// surely holds on the CPU for `params` parameters (a count in
// floating point: model_num_params_f64) at `z`'s
// stage and offload; a lower bound of estimate_memory's total for that stage.
double model_states_floor(const ZeroConfig& z, double params, int world_size, int ranks_per_host);

// What this host offers a process: its RAM (or a cgroup's memory.max, when lower) plus swap.
double host_memory_bytes();

// This process's resident set now, and its high-water mark so far (VmHWM), in bytes; 0 where
// /proc cannot tell.
double resident_bytes();
double resident_peak_bytes();

// ConfigError unless `ranks_on_host` ranks of this run, at their floor each, fit in this host's
// memory. Only for models on the CPU (train.device "cpu"): a GPU run's states live on the GPU.
void check_fits_host(const Config& cfg, double params, int world_size, int ranks_on_host);

}  // namespace zt
