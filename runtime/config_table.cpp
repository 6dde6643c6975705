// The table of the configuration's keys ([Note: one declaration per key] in runtime/config_keys.hpp),
// in the order the reader reads them: DeepSpeed's names where DeepSpeed has the key, with its
// defaults unless the doc says otherwise.
#include "runtime/config_keys.hpp"

#include <cctype>

#include "models/model_dims.hpp"
#include "models/registry.hpp"

// Each row names only the fields it sets (designated initialisers); the rest keep their defaults,
// which is the point, so GCC's warning about omitted members says nothing here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace zt {
namespace {

using nlohmann::json;

// Where a key's value lives: ZT_AT(zero.stage) is c.zero.stage.
#define ZT_AT(member) [](Config& c) -> auto& { return c.member; }

std::string member_text(const json& root, const char* section, const char* key) {
  const auto s = root.find(section);
  if (s == root.end() || !s->is_object()) return "";
  const auto v = s->find(key);
  return v != s->end() && v->is_string() ? v->get<std::string>() : "";
}
std::string scheduler_type(const json& root) { return member_text(root, "scheduler", "type"); }
bool fp16_on(const Config& c) { return c.precision.dtype == "f16"; }
bool scheduled(const Config& c) { return !c.scheduler.type.empty(); }
bool decays(const Config& c) { return scheduled(c) && c.scheduler.type != "WarmupLR"; }

// DeepSpeed's top-level keys that ztrain does not implement yet: a DeepSpeed config using one would
// train differently here. A key leaves this list in the change that implements it.
constexpr const char* kDeepSpeedNotYet[] = {
    "amp", "wall_clock_breakdown", "memory_breakdown", "flops_profiler", "comms_logger", "monitor_config",
    "data_types", "communication_data_type", "prescale_gradients", "gradient_predivide_factor", "sparse_gradients",
    "sparse_attention", "elasticity", "pipeline", "compression_training", "autotuning", "data_efficiency",
    "curriculum_learning", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "dump_state",
    "seq_parallel_communication_data_type", "load_universal_checkpoint", "use_node_local_storage", "nebula",
    "quantize_training", "eigenvalue", "progressive_layer_drop", "hybrid_engine", "weight_quantization", "timers",
    "compile", "dataloader_drop_last", "disable_allgather",
};

// DeepSpeed's zero_optimization keys that ztrain does not implement yet.
constexpr const char* kZeroNotYet[] = {
    "round_robin_gradients", "elastic_checkpoint", "zero_quantized_weights", "zero_quantized_gradients",
    "zero_quantized_nontrainable_weights", "mics_hierarchical_params_gather", "cpu_offload", "cpu_offload_params",
    "cpu_offload_use_pin_memory", "memory_efficient_linear", "use_all_reduce_for_fetch_params",
    "stage3_model_persistence_threshold", "module_granularity_threshold", "pipeline_loading_checkpoint",
    "override_module_apply", "legacy_stage1", "zeropp_loco_param", "log_trace_cache_warnings", "load_from_fp32_weights",
};

std::vector<KeySpec> refused(const std::string& section, std::span<const char* const> keys, const char* why) {
  std::vector<KeySpec> rows;
  for (const char* k : keys)
    rows.push_back({.key = section.empty() ? k : section + "." + k, .role = KeyRole::refused, .refusal = why,
                    .doc = "DeepSpeed's; not implemented yet"});
  return rows;
}

// The model section: arch and wte_units, the dimensions for_each_dim declares, init_from.
std::vector<KeySpec> model_rows() {
  // The architectures are the model specs' (models/registry.hpp), named here as they list them.
  static const std::string arch_doc = "the architecture: " + model_archs_text() + " (llama: Llama, Qwen2, Mistral, SmolLM2)";
  std::vector<KeySpec> rows = {
      {.key = "model.arch", .field = ZT_AT(model.arch), .doc = arch_doc},
      {.key = "model.wte_units", .field = ZT_AT(model.wte_units),
       .doc = "ZeRO units the tied token embedding (and head) is cut into by rows; 0: the fewest that keep each no larger than a block"},
  };
  int index = 0;
  ModelDims dims;
  for_each_dim(
      [&](const char* name, auto&) {
        const std::string_view n = name;
        const bool width = n == "n_kv_head" || n == "head_dim" || n == "intermediate_size";
        const char* doc = index < kGpt2DimCount ? "a dimension of every model (with init_from: the checkpoint's unless given)"
                          : local_attention_dim(n) ? "Gemma 3's local attention and scale (Hugging Face's config.json name); refused for an architecture without it"
                          : n.starts_with("rope_scaling.") ? "Llama 3.1's RoPE scaling (Hugging Face's rope_scaling object); the Llama family only"
                          : width ? "a width of the Llama family (0: derived, as GPT-2's); refused for an architecture without it"
                                  : "a setting of the Llama family (Hugging Face's config.json name); refused for an architecture without it";
        if (n == "padded_vocab_size") doc = "rows of the embedding; default: vocab_size rounded up to a multiple of 128, as llm.c pads it";
        rows.push_back({.key = "model." + std::string(name), .field = DimField{index++},
                        .fallback = n == "padded_vocab_size" ? "vocab_size padded" : nullptr, .doc = doc});
      },
      dims);
  rows.push_back({.key = "model.init_from", .custom = true, .type = KeyType::string, .type_text = "string or null",
                  .value = [](const Config& c) { return c.model.init_from ? json(*c.model.init_from) : json(nullptr); },
                  .nullable = true,
                  .doc = "starting weights (llm.c, safetensors, GGUF, a Hugging Face or ztrain checkpoint folder); gives the dimensions not given"});
  return rows;
}

std::vector<KeySpec> data_rows() {
  return {
      {.key = "data.format", .field = ZT_AT(data.format), .allowed = {"llmc", "bytes", "chat"},
       .doc = "llm.c token shards, raw bytes (vocabulary 256) or chat conversations (README's Data)"},
      {.key = "data.train", .field = ZT_AT(data.train), .doc = "the training data: a glob (llmc), or ':'-separated files, folders or globs; required for ztrain train"},
      {.key = "data.val", .field = ZT_AT(data.val), .doc = "the validation data, as data.train; empty: none (llmc) or the held-out tail of train"},
      {.key = "data.seq_len", .field = ZT_AT(data.seq_len), .range = {.lo = 1}, .doc = "T, the tokens of a row"},
      {.key = "data.shuffle", .field = ZT_AT(data.shuffle), .doc = "shuffle the batches; false: read in order, as llm.c's loader reads them"},
      {.key = "data.val_fraction", .field = ZT_AT(data.val_fraction), .range = {.lo = 0, .hi = 0.5, .lo_open = true},
       .doc = "bytes and chat without data.val: the share held out for validation"},
      {.key = "data.tokenizer", .field = ZT_AT(data.tokenizer),
       .doc = "chat: a tokenizer.json (or its folder), a GGUF file or a .tiktoken file; empty: model.init_from's"},
      {.key = "data.chat_template", .field = ZT_AT(data.chat_template), .doc = "chat: the template conversations are rendered with (\"chatml\", \"llama3\" or \"gemma\")"},
      {.key = "data.packing", .field = ZT_AT(data.packing), .doc = "chat: whole conversations fill rows in order; false: one per row, padded"},
      {.key = "data.system", .field = ZT_AT(data.system), .doc = "chat: the system message of conversations without one"},
  };
}

std::vector<KeySpec> train_rows() {
  return {
      {.key = "train.steps", .field = ZT_AT(train.steps), .range = {.lo = 1}, .doc = "optimizer steps"},
      {.key = "train.seed", .field = ZT_AT(train.seed), .doc = "the initialisation's and the data order's seed"},
      // libgomp cannot start teams of tens of thousands (a crash at 100,000); no host has that many cores.
      {.key = "train.threads", .field = ZT_AT(train.threads), .range = {.lo = 0, .hi = 1024}, .per_rank = true,
       .doc = "CPU threads per rank; 0: the host's cores divided among its ranks"},
      {.key = "train.val_interval", .field = ZT_AT(train.val_interval), .range = {.lo = 0},
       .doc = "validation every so many steps; 0: never"},
      {.key = "train.val_batches", .field = ZT_AT(train.val_batches), .range = {.lo = 1},
       .checked_when = [](const Config& c) { return c.train.val_interval > 0; }, .doc = "batches each validation runs over"},
      {.key = "train.save_model", .field = ZT_AT(train.save_model), .doc = "the model written at the end (llm.c's format, or .safetensors); empty: none"},
      {.key = "train.metrics", .field = ZT_AT(train.metrics), .per_rank = true, .doc = "a JSON-lines file of every step's metrics; empty: none"},
      {.key = "train.trace", .field = ZT_AT(train.trace), .doc = "a Chrome trace of the whole run, a lane per rank; empty: none"},
      // The timeout becomes a count of milliseconds; 1e7 s (four months) is far beyond any real wait.
      {.key = "train.comm_timeout_s", .field = ZT_AT(train.comm_timeout_s), .range = {.lo = 0, .hi = 1e7},
       .range_text = "in [0, 1e7] seconds (0 waits forever)", .per_rank = true,
       .doc = "a collective not complete after this many seconds ends the job; 0: never"},
      {.key = "train.comm_progress", .field = ZT_AT(train.comm_progress), .allowed = {"auto", "thread", "poll"}, .per_rank = true,
       .doc = "how MPI's asynchronous collectives move: a progress thread, polled by the scheduler, or auto"},
      {.key = "train.device", .field = ZT_AT(train.device), .allowed = {"cpu", "cuda"},
       .doc = "where the model computes; cuda: one GPU per rank, bf16 by default"},
      {.key = "train.attention", .field = ZT_AT(train.attention), .allowed = {"ztrain", "cudnn"},
       .doc = "attention's kernels: ztrain's own, or cuDNN's fused attention (cuda, bf16)"},
      {.key = "train.skip_nonfinite_steps", .field = ZT_AT(train.skip_nonfinite_steps), .range = {.lo = 0},
       .doc = "steps in a row with an inf or NaN loss or gradient norm skipped before the run stops"},
      {.key = "train.resume", .field = ZT_AT(train.resume), .custom = true, .type_text = "string or true",
       .doc = "a checkpoint folder or root to continue from; true: checkpoint.dir; empty: none"},
  };
}

std::vector<KeySpec> optimizer_rows() {
  const auto adam = [](const json& root) {
    std::string t = member_text(root, "optimizer", "type");
    for (char& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return t == "adam";
  };
  return {
      {.key = "optimizer.type", .field = ZT_AT(optimizer.type), .custom = true, .range_text = "\"AdamW\" or \"Adam\"",
       .doc = "AdamW, or DeepSpeed's Adam (decoupled weight decay: AdamW)"},
      {.key = "optimizer.params.lr", .field = ZT_AT(optimizer.lr), .range = {.lo = 0, .lo_open = true}, .doc = "the learning rate (the schedule's, with a scheduler)"},
      {.key = "optimizer.params.betas", .type = KeyType::any, .type_text = "[number, number]",
       .value = [](const Config& c) { return json::array({c.optimizer.beta1, c.optimizer.beta2}); },
       .range_text = "each in [0, 1)", .doc = "Adam's beta1 and beta2"},
      {.key = "optimizer.params.eps", .field = ZT_AT(optimizer.eps), .range = {.lo = 0, .lo_open = true}, .doc = "Adam's epsilon"},
      {.key = "optimizer.params.weight_decay", .field = ZT_AT(optimizer.weight_decay), .range = {.lo = 0},
       .doc = "decoupled weight decay of matrices and embeddings (not biases and norms)"},
      {.key = "optimizer.params.adam_w_mode", .role = KeyRole::refused, .type = KeyType::boolean, .applies = adam,
       .refusal = "false (Adam with L2 weight decay) is not implemented yet", .accepts = "true",
       .doc = "Adam only: true (AdamW) is taken, false refused"},
  };
}

std::vector<KeySpec> scheduler_rows() {
  const auto not_cosine = [](const json& r) { return scheduler_type(r) != "WarmupCosineLR"; };
  const auto cosine = [](const json& r) { return scheduler_type(r) == "WarmupCosineLR"; };
  const auto not_warmup = [](const json& r) { return scheduler_type(r) != "WarmupLR"; };
  const std::string p = "scheduler.params.";
  return {
      {.key = "scheduler.type", .field = ZT_AT(scheduler.type), .custom = true,
       .range_text = "\"WarmupLR\", \"WarmupDecayLR\" or \"WarmupCosineLR\"",
       .doc = "DeepSpeed's schedule, required with the section; no section: a constant optimizer.params.lr"},
      {.key = p + "warmup_min_lr", .field = ZT_AT(scheduler.warmup_min_lr), .range = {.lo = 0}, .checked_when = scheduled,
       .applies = not_cosine, .doc = "WarmupLR, WarmupDecayLR: the rate warmup starts from"},
      {.key = p + "warmup_max_lr", .field = ZT_AT(scheduler.warmup_max_lr), .range = {.lo = 0, .lo_open = true},
       .checked_when = scheduled, .applies = not_cosine, .doc = "WarmupLR, WarmupDecayLR: the rate warmup ends at"},
      {.key = p + "warmup_num_steps", .field = ZT_AT(scheduler.warmup_num_steps), .range = {.lo = 0}, .checked_when = scheduled,
       .doc = "warmup's steps"},
      {.key = p + "warmup_type", .field = ZT_AT(scheduler.warmup_type), .allowed = {"log", "linear"}, .checked_when = scheduled,
       .doc = "warmup's shape"},
      {.key = p + "total_num_steps", .field = ZT_AT(scheduler.total_num_steps), .range = {.lo = 0, .lo_open = true},
       .checked_when = decays, .applies = not_warmup, .doc = "WarmupDecayLR, WarmupCosineLR (required): the schedule's length"},
      {.key = p + "warmup_min_ratio", .field = ZT_AT(scheduler.warmup_min_ratio), .range = {.lo = 0, .hi = 1},
       .checked_when = scheduled, .applies = cosine, .doc = "WarmupCosineLR: warmup's start as a share of lr"},
      {.key = p + "cos_min_ratio", .field = ZT_AT(scheduler.cos_min_ratio), .range = {.lo = 0, .hi = 1},
       .checked_when = scheduled, .applies = cosine, .doc = "WarmupCosineLR: the cosine's end as a share of lr"},
  };
}

// offload_optimizer or offload_param.
std::vector<KeySpec> offload_rows(bool param) {
  const std::string p = std::string("zero_optimization.") + (param ? "offload_param." : "offload_optimizer.");
  std::vector<KeySpec> rows = {
      {.key = p + "device", .field = param ? FieldOf<std::string>(ZT_AT(zero.offload_param.device)) : ZT_AT(zero.offload_optimizer.device),
       .allowed = {"none", "cpu", "nvme"}, .doc = param ? "where stage 3's parameter shards live" : "where the optimizer's states live"},
      {.key = p + "nvme_path", .field = param ? FieldOf<std::string>(ZT_AT(zero.offload_param.nvme_path)) : ZT_AT(zero.offload_optimizer.nvme_path),
       .per_rank = true, .nullable = true, .doc = "nvme: the folder the swap files go under (required)"},
      {.key = p + "pin_memory", .field = param ? FieldOf<bool>(ZT_AT(zero.offload_param.pin_memory)) : ZT_AT(zero.offload_optimizer.pin_memory),
       .per_rank = true, .doc = "lock the host buffers in memory"},
      {.key = p + "buffer_count", .field = param ? FieldOf<int>(ZT_AT(zero.offload_param.buffer_count)) : ZT_AT(zero.offload_optimizer.buffer_count),
       .range = {.lo = 1}, .doc = param ? "shards read ahead or written behind at a time" : "sub-group buffers"},
  };
  if (param) {
    rows.push_back({.key = p + "buffer_size", .field = ZT_AT(zero.offload_param.buffer_size), .range = {.lo = 0, .lo_open = true},
                    .doc = "elements of one read-ahead buffer"});
    rows.push_back({.key = p + "max_in_cpu", .field = ZT_AT(zero.offload_param.max_in_cpu), .doc = "elements kept in host memory"});
    return rows;
  }
  const std::vector<KeySpec> more = {
      {.key = p + "pipeline", .role = KeyRole::alias, .type = KeyType::boolean, .alias_of = "pipeline_read and pipeline_write",
       .doc = "DeepSpeed's older key for both"},
      {.key = p + "pipeline_read", .field = ZT_AT(zero.offload_optimizer.pipeline_read), .doc = "read sub-group k+1 while updating k"},
      {.key = p + "pipeline_write", .field = ZT_AT(zero.offload_optimizer.pipeline_write), .doc = "write sub-group k-1 while updating k"},
      {.key = p + "overlap_step", .field = ZT_AT(zero.offload_optimizer.overlap_step),
       .doc = "nvme: the update runs on behind the next forward (ztrain's key)"},
      {.key = p + "fast_init", .role = KeyRole::ignored, .type = KeyType::boolean, .doc = "DeepSpeed's; changes nothing here"},
      {.key = p + "ratio", .role = KeyRole::refused, .type = KeyType::number,
       .refusal = "a partial offload (ratio < 1) is not implemented yet; use 1", .accepts = "1", .doc = "DeepSpeed's; only 1 (all) is taken"},
  };
  rows.insert(rows.end(), more.begin(), more.end());
  return rows;
}

std::vector<KeySpec> zero_rows() {
  const std::string z = "zero_optimization.";
  std::vector<KeySpec> rows = refused("zero_optimization", kZeroNotYet, "is a DeepSpeed ZeRO key that ztrain does not implement yet");
  const std::vector<KeySpec> own = {
      {.key = z + "stage", .field = ZT_AT(zero.stage), .range = {.lo = 0, .hi = 3}, .range_text = "0, 1, 2 or 3",
       .doc = "0 DDP, 1 optimizer states sharded, 2 + gradients, 3 + parameters"},
      {.key = z + "sharding_strategy", .type = KeyType::string,
       .value = [](const Config& c) { return c.zero.hybrid ? json(c.zero.stage == 3 ? "HYBRID_SHARD" : "_HYBRID_SHARD_ZERO2") : json(nullptr); },
       .allowed = {"NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"},
       .doc = "FSDP's name for the stage (agreed on as the stage and the hybrid strategy)"},
      {.key = z + "shard_group_size", .field = ZT_AT(zero.shard_group_size),
       .doc = "hybrid sharding: ranks per shard group (>= 1); 0: the ranks per host"},
      {.key = z + "mics_shard_size", .type = KeyType::integer,
       .value = [](const Config& c) { return json(c.zero.hybrid && c.zero.stage == 3 ? c.zero.shard_group_size : -1); },
       .fallback = "-1", .doc = "DeepSpeed's MiCS: stage 3 hybrid sharding in groups of this many ranks; -1: off"},
      {.key = z + "zero_hpz_partition_size", .field = ZT_AT(zero.hpz_partition_size), .range = {.lo = 1},
       .doc = "ZeRO++'s hpZ: stage 3 keeps a secondary shard within groups of this many ranks; 1: none"},
      {.key = z + "overlap_comm", .field = ZT_AT(zero.overlap_comm), .doc = "collectives run behind compute; false: each waited at once"},
      {.key = z + "reduce_scatter", .field = ZT_AT(zero.reduce_scatter), .doc = "false: gradients are all-reduced and each rank keeps its slice"},
      {.key = z + "contiguous_gradients", .field = ZT_AT(zero.contiguous_gradients), .doc = "DeepSpeed's; gradients are always contiguous per unit"},
      {.key = z + "allgather_partitions", .role = KeyRole::refused, .type = KeyType::boolean,
       .refusal = "false (a broadcast per partition) is not implemented yet", .accepts = "true", .doc = "DeepSpeed's; only true is taken"},
      {.key = z + "ignore_unused_parameters", .role = KeyRole::ignored, .type = KeyType::boolean,
       .doc = "DeepSpeed's; changes nothing (every parameter is used)"},
      {.key = z + "reduce_bucket_size", .field = ZT_AT(zero.reduce_bucket_size), .range = {.lo = 0, .lo_open = true},
       .doc = "gradient elements in flight in reductions"},
      {.key = z + "allgather_bucket_size", .field = ZT_AT(zero.allgather_bucket_size), .range = {.lo = 0, .lo_open = true},
       .doc = "stages 1-2: parameter elements in flight in the gathers after an update"},
      {.key = z + "stage3_prefetch_bucket_size", .field = ZT_AT(zero.prefetch_bucket_size), .doc = "stage 3: parameter elements gathered ahead"},
      {.key = z + "stage3_max_live_parameters", .field = ZT_AT(zero.max_live_parameters), .doc = "stage 3: gathered parameter elements at most"},
      {.key = z + "stage3_max_reuse_distance", .field = ZT_AT(zero.max_reuse_distance),
       .doc = "stage 3: a unit used again within this many elements stays gathered (DeepSpeed's default: 1e9)"},
      {.key = z + "stage3_param_persistence_threshold", .field = ZT_AT(zero.param_persistence_threshold),
       .doc = "stage 3: units this small stay gathered"},
      {.key = z + "sub_group_size", .field = ZT_AT(zero.sub_group_size), .range = {.lo = 0, .lo_open = true},
       .doc = "elements the offloaded optimizer updates at a time"},
      {.key = z + "stage3_gather_fp16_weights_on_model_save", .role = KeyRole::alias, .field = ZT_AT(zero.gather_16bit_on_save),
       .alias_of = "zero_optimization.stage3_gather_16bit_weights_on_model_save", .doc = "DeepSpeed's older name"},
      {.key = z + "stage3_gather_16bit_weights_on_model_save", .field = ZT_AT(zero.gather_16bit_on_save),
       .doc = "each checkpoint also holds model.safetensors in the 16-bit dtype"},
  };
  rows.insert(rows.end(), own.begin(), own.end());
  for (bool param : {false, true}) {
    const auto o = offload_rows(param);
    rows.insert(rows.end(), o.begin(), o.end());
  }
  rows.push_back({.key = z + "frozen_params", .field = ZT_AT(zero.frozen_params), .allowed = {"sharded", "replicated"},
                  .doc = "stage 3: frozen parameters (LoRA's model) sharded and gathered for each use, or whole on every rank"});
  return rows;
}

std::vector<KeySpec> lora_rows() {
  return {
      {.key = "lora.r", .field = ZT_AT(lora.r), .range = {.lo = 0}, .range_text = "at least 1 (or 0: no LoRA)",
       .doc = "the adapters' rank; 0: no LoRA"},
      {.key = "lora.alpha", .field = ZT_AT(lora.alpha), .range = {.lo = 0, .lo_open = true}, .range_text = "positive",
       .doc = "the adapters' scale is alpha / r (alpha / sqrt(r) with use_rslora)"},
      {.key = "lora.lora_alpha", .role = KeyRole::alias, .field = ZT_AT(lora.alpha), .alias_of = "lora.alpha", .doc = "PEFT's name"},
      {.key = "lora.dropout", .field = ZT_AT(lora.dropout), .range = {.lo = 0, .hi = 1, .hi_open = true},
       .doc = "dropout of the adapters' input"},
      {.key = "lora.lora_dropout", .role = KeyRole::alias, .field = ZT_AT(lora.dropout), .alias_of = "lora.dropout", .doc = "PEFT's name"},
      {.key = "lora.init", .field = ZT_AT(lora.init), .allowed = {"default", "gaussian"},
       .range_text = "\"default\" (PEFT's init_lora_weights true) or \"gaussian\"", .doc = "PEFT's init_lora_weights"},
      {.key = "lora.use_rslora", .field = ZT_AT(lora.use_rslora), .doc = "rank-stabilised scale alpha / sqrt(r)"},
      {.key = "lora.init_from", .field = ZT_AT(lora.init_from),
       .doc = "a PEFT adapter folder the adapters start from; empty: init"},
      {.key = "lora.target_modules", .type = KeyType::any, .type_text = "string or [string]",
       .value = [](const Config& c) { return json(c.lora.target_modules); },
       .doc = "PEFT's module names, or \"all-linear\"; empty: the architecture's default"},
  };
}

std::vector<KeySpec> activation_checkpointing_rows() {
  const std::string a = "activation_checkpointing.";
  std::vector<KeySpec> rows = {
      {.key = a + "mode", .type = KeyType::string,
       .value = [](const Config& c) {
         using Mode = ActivationCheckpointing::Mode;
         const Mode m = c.activation_checkpointing.mode;
         return json(m == Mode::none ? "none" : m == Mode::full ? "full" : "selective");
       },
       .fallback = "\"full\"", .allowed = {"full", "selective", "none"},
       .doc = "the section turns checkpointing on: every block (full), selected ones, or none"},
      {.key = a + "selective_ac_option", .type = KeyType::any, .type_text = "\"op\" or integer",
       .value = [](const Config& c) {
         const auto& ac = c.activation_checkpointing;
         return ac.mode == ActivationCheckpointing::Mode::selective_op ? json("op") : json(ac.every);
       },
       .fallback = "2", .doc = "selective: \"op\" (keep matmul outputs) or k (every k-th block)"},
      {.key = a + "cpu_checkpointing", .field = ZT_AT(activation_checkpointing.cpu_checkpointing),
       .doc = "the kept block inputs wait in pinned host memory"},
  };
  for (const char* k : {"partition_activations", "contiguous_memory_optimization", "synchronize_checkpoint_boundary", "profile"})
    rows.push_back({.key = a + k, .role = KeyRole::ignored, .type = KeyType::boolean, .doc = "DeepSpeed's; changes nothing here"});
  rows.push_back({.key = a + "number_checkpoints", .role = KeyRole::ignored, .type = KeyType::integer, .doc = "DeepSpeed's; changes nothing here"});
  return rows;
}

std::vector<KeySpec> precision_rows() {
  std::vector<KeySpec> rows = {
      {.key = "bf16.enabled", .type = KeyType::boolean, .value = [](const Config& c) { return json(c.precision.dtype == "bf16"); },
       .fallback = "false", .doc = "bf16 mixed precision (the default on cuda)"},
      {.key = "bf16.immediate_grad_update", .role = KeyRole::ignored, .type = KeyType::boolean,
       .doc = "DeepSpeed's; gradients are always reduced per unit"},
      {.key = "bfloat16.enabled", .role = KeyRole::alias, .type = KeyType::boolean, .alias_of = "bf16.enabled", .doc = "DeepSpeed's other name"},
      {.key = "bfloat16.immediate_grad_update", .role = KeyRole::alias, .type = KeyType::boolean,
       .alias_of = "bf16.immediate_grad_update", .doc = "DeepSpeed's other name"},
      {.key = "fp16.enabled", .type = KeyType::boolean, .value = [](const Config& c) { return json(c.precision.dtype == "f16"); },
       .fallback = "false", .doc = "fp16 mixed precision with a dynamic loss scale"},
      {.key = "fp16.loss_scale", .field = ZT_AT(precision.loss_scale), .range = {.lo = 0}, .checked_when = fp16_on,
       .doc = "0: dynamic; else this fixed scale"},
      {.key = "fp16.initial_scale_power", .field = ZT_AT(precision.initial_scale_power), .range = {.lo = 0, .hi = 64},
       .checked_when = fp16_on, .doc = "the dynamic scale starts at 2^this"},
      {.key = "fp16.loss_scale_window", .field = ZT_AT(precision.loss_scale_window), .range = {.lo = 1}, .checked_when = fp16_on,
       .doc = "steps without overflow that double the scale"},
      {.key = "fp16.hysteresis", .field = ZT_AT(precision.hysteresis), .range = {.lo = 1}, .checked_when = fp16_on,
       .doc = "overflows that halve the scale"},
      {.key = "fp16.consecutive_hysteresis", .field = ZT_AT(precision.consecutive_hysteresis), .doc = "hysteresis counts consecutive overflows only"},
      {.key = "fp16.min_loss_scale", .field = ZT_AT(precision.min_loss_scale), .range = {.lo = 0, .lo_open = true},
       .checked_when = fp16_on, .doc = "the scale never falls below this"},
  };
  for (const char* k : {"auto_cast", "fp16_master_weights_and_grads"})
    rows.push_back({.key = std::string("fp16.") + k, .role = KeyRole::refused,
                    .refusal = "is a DeepSpeed fp16 option that ztrain does not implement yet", .accepts = "false",
                    .doc = "DeepSpeed's, not implemented: only false is taken"});
  return rows;
}

std::vector<KeySpec> io_rows() {
  constexpr const char* kCheckpointNotYet[] = {"tag_validation", "load_universal", "use_node_local_storage", "parallel_write"};
  std::vector<KeySpec> rows = refused("checkpoint", kCheckpointNotYet, "is a DeepSpeed checkpoint key that ztrain does not implement");
  const std::vector<KeySpec> own = {
      {.key = "checkpoint.dir", .field = ZT_AT(checkpoint.dir), .doc = "the checkpoint root: <dir>/step_<k>/ and <dir>/latest"},
      {.key = "checkpoint.save_interval", .field = ZT_AT(checkpoint.save_interval), .range = {.lo = 0},
       .doc = "steps between saves (and the last step); 0: never"},
      {.key = "checkpoint.keep_last", .field = ZT_AT(checkpoint.keep_last), .range = {.lo = 0}, .doc = "complete checkpoints kept; 0: all"},
      {.key = "checkpoint.overwrite", .field = ZT_AT(checkpoint.overwrite),
       .doc = "a run without --resume may save into a folder holding another run's checkpoints"},
      {.key = "aio.block_size", .field = ZT_AT(aio.block_size), .range_text = "a positive multiple of 4096", .per_rank = true,
       .doc = "nvme offload: bytes per request"},
      {.key = "aio.queue_depth", .field = ZT_AT(aio.queue_depth), .range = {.lo = 1}, .per_rank = true, .doc = "nvme offload: requests in flight per ring"},
      {.key = "aio.thread_count", .role = KeyRole::alias, .field = ZT_AT(aio.intra_op_parallelism), .per_rank = true,
       .alias_of = "aio.intra_op_parallelism", .warning = "aio.thread_count is deprecated; use aio.intra_op_parallelism",
       .doc = "DeepSpeed's older name (deprecated)"},
      {.key = "aio.intra_op_parallelism", .field = ZT_AT(aio.intra_op_parallelism), .range = {.lo = 1}, .per_rank = true,
       .doc = "nvme offload: rings (each with its thread) one transfer is spread over"},
      {.key = "aio.single_submit", .field = ZT_AT(aio.single_submit), .per_rank = true, .doc = "one submit call per request, not per batch"},
      {.key = "aio.overlap_events", .field = ZT_AT(aio.overlap_events), .per_rank = true, .doc = "refill the queue as completions arrive"},
      {.key = "aio.use_gds", .role = KeyRole::refused, .refusal = "GPUDirect Storage is not implemented", .accepts = "false",
       .doc = "DeepSpeed's GPUDirect Storage: only false is taken"},
  };
  rows.insert(rows.end(), own.begin(), own.end());
  return rows;
}

// tensorboard and csv_monitor: rank 0 writes them, so each rank's own.
std::vector<KeySpec> monitor_rows() {
  std::vector<KeySpec> rows;
  for (const bool tb : {true, false}) {
    const std::string m = tb ? "tensorboard." : "csv_monitor.";
    const std::vector<KeySpec> own = {
        {.key = m + "enabled", .field = tb ? FieldOf<bool>(ZT_AT(tensorboard.enabled)) : ZT_AT(csv_monitor.enabled), .per_rank = true,
         .doc = tb ? "rank 0 writes the run's scalars as TensorBoard event files" : "rank 0 writes the run's scalars as CSV files, one a tag"},
        {.key = m + "output_path", .field = tb ? FieldOf<std::string>(ZT_AT(tensorboard.output_path)) : ZT_AT(csv_monitor.output_path),
         .per_rank = true, .doc = "the folder job_name goes under; empty: the working folder"},
        {.key = m + "job_name", .field = tb ? FieldOf<std::string>(ZT_AT(tensorboard.job_name)) : ZT_AT(csv_monitor.job_name),
         .per_rank = true, .doc = "the folder the files go to, under output_path"},
    };
    rows.insert(rows.end(), own.begin(), own.end());
  }
  for (const char* k : {"wandb", "comet"})
    rows.push_back({.key = k, .role = KeyRole::refused, .custom = true, .type = KeyType::object, .type_text = "refused when enabled",
                    .doc = "DeepSpeed's monitor to a network service: refused when enabled"});
  return rows;
}

std::vector<KeySpec> batch_rows() {
  return {
      {.key = "train_batch_size", .field = ZT_AT(train_batch_size), .per_rank = true,
       .doc = "must equal micro batch x accumulation x world size (>= 1); 0: not given"},
      {.key = "train_micro_batch_size_per_gpu", .field = ZT_AT(micro_batch), .range = {.lo = 1}, .doc = "B, the rows of a micro-batch per rank"},
      {.key = "gradient_accumulation_steps", .field = ZT_AT(grad_accum), .range = {.lo = 1}, .doc = "micro-batches per optimizer step"},
      {.key = "gradient_clipping", .field = ZT_AT(gradient_clipping), .range = {.lo = 0}, .doc = "clip the global gradient norm to this; 0: off"},
      {.key = "steps_per_print", .field = ZT_AT(steps_per_print), .range = {.lo = 1}, .per_rank = true,
       .doc = "a progress line every so many steps"},
  };
}

std::vector<KeySpec> build_table() {
  std::vector<KeySpec> t;
  for (const auto& part : {model_rows(), data_rows(), train_rows(), optimizer_rows(), scheduler_rows(), zero_rows(), lora_rows(),
                           activation_checkpointing_rows(), precision_rows(), io_rows(), monitor_rows(), batch_rows(),
                           refused("", kDeepSpeedNotYet, "is a DeepSpeed key that ztrain does not implement yet")})
    t.insert(t.end(), part.begin(), part.end());
  return t;
}

#undef ZT_AT

}  // namespace

std::span<const KeySpec> config_table() {
  static const std::vector<KeySpec> table = build_table();
  return table;
}

}  // namespace zt
