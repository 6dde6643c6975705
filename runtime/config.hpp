// The training configuration: a JSON file using DeepSpeed's key names where they exist, plus our
// own `model`, `data` and `train` sections. Parsing is strict: an unknown key is an error naming
// its path, a DeepSpeed key we do not implement yet says so, wrong types and impossible values
// name the key. Nothing is silently ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/checkpointing.hpp"
#include "models/lora.hpp"
#include "models/model_dims.hpp"
#include "models/model_spec.hpp"
#include "offload/aio_config.hpp"

namespace zt {

// Every configuration problem; what() starts with "config: <dotted.path>: ". The keys, their
// defaults' meaning, ranges and rank agreement: runtime/config_table.cpp ([Note: one declaration
// per key] in runtime/config_keys.hpp); the structs below are what reading them gives.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ModelConfig {
  std::string arch = kDefaultModelArch;
  ModelDims dims;
  std::optional<std::string> init_from;  // llm.c checkpoint or ztrain checkpoint folder; gives the dimensions
  int wte_units = 0;  // units the tied embedding is cut into (models/gpt2.hpp); 0: automatic
  // Which of the dimension keys the file (or --set) gave explicitly: with init_from these must
  // agree with the checkpoint, the others are taken from it.
  std::vector<std::string> given;
};

struct DataConfig {
  std::string format = "llmc";  // "llmc" token shards, "bytes" (raw files, vocabulary 256) or "chat"
  std::string train;            // glob (llmc) or files / folders / globs separated by ':' (bytes, chat)
  std::string val;              // empty: none (llmc), or the held-out tail of train (bytes, chat)
  int seq_len = 256;
  bool shuffle = false;
  double val_fraction = 0.1;    // bytes/chat without `val`: share of bytes/conversations held out, in (0, 0.5]
  // chat ([Note: chat rows] in runtime/data/chat_data.hpp): the tokenizer (a tokenizer.json or
  // its folder, a GGUF file, a .tiktoken file; empty: model.init_from's), the template's name,
  // whether conversations are packed into rows, and a system message for conversations without.
  std::string tokenizer;
  std::string chat_template = "chatml";
  bool packing = false;
  std::string system;
};

struct TrainConfig {
  int steps = 1000;
  uint64_t seed = 1337;
  int threads = 0;  // 0: the host's cores shared among its ranks
  int val_interval = 100;  // 0: never
  int val_batches = 10;
  std::string save_model;  // llm.c checkpoint written at the end; empty: none
  std::string metrics;     // JSON lines file; empty: none
  std::string trace;       // Chrome trace of the whole run, lanes per rank; empty: none
  // A collective that does not complete within this many seconds ends the job (0: never).
  double comm_timeout_s = 300;
  // How MPI's asynchronous collectives move: "thread" (a progress thread), "poll" (the ZeRO
  // scheduler tests them at every unit boundary) or "auto": poll where the ranks' compute threads
  // take every core of the host, else thread (ZT_MPI_PROGRESS, when set, decides instead).
  std::string comm_progress = "auto";
  // Steps in a row whose loss or gradient norm is inf or NaN that are skipped (no update, on every
  // rank) before the run stops; 0: the first one stops it ([Note: non-finite steps] in
  // runtime/train/trainer.hpp).
  int skip_nonfinite_steps = 0;
  // `ztrain train --resume [DIR]`: a checkpoint folder or root to continue from; empty: none.
  std::string resume;
  // Where the model computes: "cpu", or "cuda" (one GPU per rank, local rank modulo the GPUs the
  // process sees; collectives over NCCL, bootstrapped over the ranks' MPI). On cuda bf16 is the
  // default precision (a config that names neither bf16 nor fp16 gets bf16.enabled).
  std::string device = "cpu";
  // Which kernels run attention: "ztrain" (our own, every device and dtype) or "cudnn" (cuDNN's
  // fused scaled-dot-product attention: cuda and bf16 only, in a build with cuDNN).
  std::string attention = "ztrain";
};

// Checkpoints ([Note: checkpoint layout] in runtime/checkpoint/checkpoint.hpp).
struct CheckpointConfig {
  std::string dir;        // the checkpoint root: <dir>/step_<k>/, <dir>/latest
  int save_interval = 0;  // steps between saves (and the last step); 0: never
  int keep_last = 0;      // complete checkpoints kept; 0: all
  // A run without --resume may save into a folder holding another run's checkpoints, which its
  // first save then removes ([Note: one history per folder] in runtime/checkpoint/checkpoint_root.hpp).
  bool overwrite = false;
};

struct OptimizerConfig {
  std::string type = "AdamW";
  double lr = 3e-4;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// DeepSpeed's schedulers, with DeepSpeed's defaults; type empty means a constant optimizer.lr.
struct SchedulerConfig {
  std::string type;  // "", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 0.001;
  int warmup_num_steps = 1000;
  std::string warmup_type = "log";  // "log" or "linear"
  int total_num_steps = 0;          // required by WarmupDecayLR and WarmupCosineLR
  double warmup_min_ratio = 0.0;    // WarmupCosineLR
  double cos_min_ratio = 0.0001;    // WarmupCosineLR
};

// DeepSpeed's zero_optimization.offload_optimizer and offload_param ([Note: optimizer offload]
// in runtime/zero/optimizer_offload.hpp, [Note: parameter offload] in runtime/zero/param_offload.hpp).
// Sizes in elements.
struct OffloadConfig {
  std::string device = "none";  // "none", "cpu" or "nvme"
  std::string nvme_path;        // nvme: the folder swap files go under (<nvme_path>/<job>/rank<r>/)
  bool pin_memory = false;      // lock host buffers in memory (mlock)
  int buffer_count = 4;         // sub-group buffers (optimizer; DeepSpeed's 4) or shard buffers (param; 5)
  bool pipeline_read = false;   // optimizer: read sub-group k+1 while updating k
  bool pipeline_write = false;  // optimizer: write sub-group k-1 while updating k
  // optimizer, nvme: the update runs on behind the next forward ([Note: update behind the next
  // forward] in runtime/zero/optimizer_offload.hpp); a ztrain key, not DeepSpeed's.
  bool overlap_step = true;
  int64_t buffer_size = 100'000'000;   // param: elements of one read-ahead buffer
  int64_t max_in_cpu = 1'000'000'000;  // param: elements kept in host memory
  bool enabled() const { return device != "none"; }
};

// DeepSpeed's zero_optimization section (sizes in elements, as DeepSpeed counts them), or FSDP's
// sharding_strategy in its place. [Note: ZeRO stages] in runtime/zero/engine.hpp.
struct ZeroConfig {
  int stage = 0;                  // 0 DDP, 1 optimizer states, 2 + gradients, 3 + parameters
  bool overlap_comm = true;       // collectives run async behind compute; false: each one waited at once
  bool reduce_scatter = true;     // false: gradients are all-reduced and each rank keeps its slice
  bool contiguous_gradients = true;
  int64_t reduce_bucket_size = 500'000'000;     // gradient elements in flight in reductions
  int64_t allgather_bucket_size = 500'000'000;  // parameter elements in flight in post-update gathers (stages 1-2)
  int64_t prefetch_bucket_size = 50'000'000;    // stage3_prefetch_bucket_size
  int64_t max_live_parameters = 1'000'000'000;  // stage3_max_live_parameters
  // stage3_max_reuse_distance: a unit used again before this many elements of other units ran stays
  // gathered (within max_live_parameters). 0, not DeepSpeed's 1e9: freed as soon as possible.
  int64_t max_reuse_distance = 0;
  int64_t param_persistence_threshold = 100'000;  // stage3_param_persistence_threshold
  OffloadConfig offload_optimizer;             // stages 1-3
  OffloadConfig offload_param = [] {           // stage 3, with DeepSpeed's 5 shard buffers
    OffloadConfig o;
    o.buffer_count = 5;
    return o;
  }();
  int64_t sub_group_size = 1'000'000'000;      // elements the offloaded optimizer updates at a time
  // stage3_gather_16bit_weights_on_model_save: each checkpoint also holds model.safetensors, the
  // whole model in the wire dtype, gathered a unit at a time.
  bool gather_16bit_on_save = false;
  // Where frozen parameters (LoRA's base model) live at stage 3 ([Note: frozen units] in
  // runtime/zero/sharded_unit.hpp): "sharded" (each rank its shard, gathered for each use) or
  // "replicated" (whole on every rank, never gathered); a ztrain key, not DeepSpeed's.
  std::string frozen_params = "sharded";
  // [Note: shard groups] in runtime/zero/groups.hpp. hybrid: FSDP's HYBRID_SHARD (stage 3) and
  // _HYBRID_SHARD_ZERO2 (stage 2), or DeepSpeed's MiCS (mics_shard_size, stage 3): units sharded
  // within groups of shard_group_size consecutive ranks (0: the ranks per host), replicated
  // across the groups.
  bool hybrid = false;
  int shard_group_size = 0;
  // ZeRO++'s hpZ (zero_hpz_partition_size, stage 3): after a unit's gather over every rank, each
  // keeps a secondary shard of its 16-bit parameters within groups of this many consecutive ranks,
  // and the unit's later gathers (backward, recompute) stay within the group. 1: none.
  int hpz_partition_size = 1;
};

// DeepSpeed's bf16 and fp16 sections ([Note: mixed precision] in runtime/zero/sharded_unit.hpp).
// fp16 scales the loss dynamically, with DeepSpeed's rules and defaults: loss_scale 0 means
// dynamic, starting at 2^initial_scale_power; an overflow (inf or NaN in any rank's gradients)
// skips the step and, after `hysteresis` overflows, halves the scale (not below min_loss_scale);
// loss_scale_window steps without overflow double it.
struct PrecisionConfig {
  std::string dtype = "f32";  // "f32", "bf16" or "f16"
  double loss_scale = 0.0;    // fp16: 0 = dynamic, else this fixed scale
  int initial_scale_power = 16;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;
};

// DeepSpeed's tensorboard and csv_monitor sections: rank 0 writes the run's scalars into
// output_path/job_name (runtime/train/monitor.hpp).
struct MonitorConfig {
  bool enabled = false;
  std::string output_path;  // "": the working folder, as DeepSpeed joins it
  std::string job_name = "DeepSpeedJobName";
};

struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  ZeroConfig zero;
  // DeepSpeed's activation_checkpointing section with torchtitan's mode keys ([Note: activation
  // checkpointing] in tensor/tape.hpp).
  ActivationCheckpointing activation_checkpointing;
  LoraConfig lora;  // the top-level "lora" section, PEFT's LoraConfig ([Note: LoRA units] in models/lora.hpp)
  PrecisionConfig precision;
  CheckpointConfig checkpoint;
  AioConfig aio;  // DeepSpeed's aio section: the io_uring engine of nvme offload
  MonitorConfig tensorboard, csv_monitor;
  int train_batch_size = 0;  // 0: not given (then micro * accumulation * world size)
  int micro_batch = 4;       // train_micro_batch_size_per_gpu
  int grad_accum = 1;        // gradient_accumulation_steps
  double gradient_clipping = 0.0;  // 0: off
  int steps_per_print = 10;
};

// Applies one `--set dotted.key=value` override to the raw JSON before validation. The value is
// parsed as JSON when it is valid JSON (numbers, true, null, [..], {..}) and taken as a string
// otherwise. Intermediate objects are created as needed.
void apply_override(nlohmann::json& j, const std::string& assignment);

// Where a run's batches come from: its data files (`ztrain train`: data.train is required), or
// the caller of the embedding API (include/ztrain/ztrain.h: data.train may be left out).
enum class BatchSource { data, caller };

// Validates and converts; throws ConfigError.
Config parse_config(const nlohmann::json& j, BatchSource batches = BatchSource::data);

// Reads the file (ConfigError naming the file if missing or not JSON), applies the overrides in
// order, then parses.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   BatchSource batches = BatchSource::data);
// A file's path, or the JSON text itself where it starts with '{' (the embedding API takes either).
Config load_config_text(const std::string& path_or_json, BatchSource batches);

// Checks train_batch_size == micro * accumulation * world_size (when given); the message gives all
// four numbers.
void check_batch_size(const Config& c, int world_size);

}  // namespace zt
