#include "runtime/plan/estimate.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "models/registry.hpp"
#include "runtime/plan/ghost_step.hpp"
#include "runtime/train/metrics.hpp"
#include "runtime/train/trainer.hpp"

namespace zt {

namespace {

// Two steps as Trainer::step runs them; the peaks are the second's (the first records the
// schedule and grows the communicator's buffer, as a real run's first step does).
StageEstimate estimate_stage(const Config& cfg, const Model& model, int stage, int world, int ranks_per_host) {
  GhostStep step(cfg, model, stage, world, ranks_per_host);
  for (int i = 0; i < 2; ++i) {
    step.ledger().reset_peaks();
    step.run();
  }
  const MemSnapshot s = step.ledger().snapshot();
  StageEstimate e;
  e.stage = stage;
  e.peak = s.peak;
  e.total = s.total_peak;
  return e;
}

// [Note: DeepSpeed's estimate] The DeepSpeed column is DeepSpeed's own model-states numbers as
// deepspeed/runtime/zero/stage_1_and_2.py and stage3.py write them (0.19.8): the GPU memory of
// estimate_zero2_model_states_mem_needs (2P + int(18P/N); 2P with cpu_offload) and of
// estimate_zero3_model_states_mem_needs (4L + int(18P/N); with cpu_offload 4L + int(2P/N), or 4L
// with cpu_offload_params too), for 16-bit parameters and gradients with fp32 master weights and
// Adam states, P parameters over N GPUs, offload as configured (the optimizer's, cpu or nvme,
// is DeepSpeed's cpu_offload). L is DeepSpeed's "largest layer" (model_to_params): the most
// parameters one torch module holds itself, for GPT-2 its token embedding (Vp x C), not a ztrain
// unit. Stages 0-1, for which DeepSpeed has no estimator, take the ZeRO paper's 16P and 4P + 12P/N.
// tests/ref/deepspeed_estimate.py holds every figure to DeepSpeed's own functions.
int64_t deepspeed_model_states(int stage, int64_t P, int64_t largest_layer, int N, const ZeroConfig& z) {
  // Python's int(a * P / N): the quotient correctly rounded to a double, then truncated; P below
  // 2^53 / 18 keeps 18P exact as a double.
  auto share = [&](int64_t a) { return static_cast<int64_t>(static_cast<double>(a * P) / N); };
  const bool cpu_offload = z.offload_optimizer.enabled(), cpu_offload_params = z.offload_param.enabled();
  switch (stage) {
    case 0: return 16 * P;
    case 1: return 4 * P + share(12);
    case 2: return cpu_offload ? 2 * P : 2 * P + share(18);
    default: {
      const int64_t largest_layer_memory = 4 * largest_layer;
      if (!cpu_offload) return largest_layer_memory + share(18);
      return cpu_offload_params ? largest_layer_memory : largest_layer_memory + share(2);
    }
  }
}

std::string cell(const std::string& s, size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

const char* precision_name(const std::string& dtype) {
  return dtype == "bf16" ? "bf16 (fp32 master weights)" : dtype == "f16" ? "fp16 (fp32 master weights)" : "fp32";
}

// zero_optimization.frozen_params, in the order MemoryEstimate::frozen_policies holds them.
constexpr const char* kFrozenPolicies[] = {"sharded", "replicated"};

std::string category(size_t c) { return std::string(category_name(static_cast<MemCategory>(c))); }

}  // namespace

MemoryEstimate estimate_memory(const Config& cfg, int world_size, int ranks_per_host) {
  const std::unique_ptr<Model> owned = ghost_model(cfg, world_size);
  MemoryEstimate e;
  e.dims = owned->dims();
  e.world_size = world_size;
  const Model& model = *owned;
  e.num_params = model.num_params();
  e.trainable_params = model.num_trainable_params();
  for (const UnitLayout& u : model.layout()) e.largest_unit = std::max(e.largest_unit, u.numel);
  e.deepspeed_largest_layer = model.deepspeed_largest_layer();
  for (int stage = 0; stage <= 3; ++stage) {
    e.stages.push_back(estimate_stage(cfg, model, stage, world_size, ranks_per_host));
    e.stages.back().deepspeed = static_cast<size_t>(
        deepspeed_model_states(stage, e.num_params, e.deepspeed_largest_layer, world_size, cfg.zero));
  }
  e.checkpointing = cfg.activation_checkpointing.describe();
  using Mode = ActivationCheckpointing::Mode;
  for (const Mode m : {Mode::none, Mode::full, Mode::selective_op, Mode::selective_block}) {
    Config c = cfg;
    ActivationCheckpointing& a = c.activation_checkpointing;
    if (m == Mode::selective_block && a.mode != m) a.every = 2;
    a.mode = m;
    a.cpu_checkpointing = a.cpu_checkpointing && m != Mode::none;
    const std::unique_ptr<Model> moded = make_run_model(c, e.dims, c.model.wte_units);
    e.checkpointing_modes.emplace_back(a.describe(), estimate_stage(c, *moded, cfg.zero.stage, world_size, ranks_per_host));
  }
  if (e.trainable_params < e.num_params) {  // [Note: frozen units]: stage 3 under both policies
    for (const char* policy : kFrozenPolicies) {
      Config c = cfg;
      c.zero.frozen_params = policy;
      e.frozen_policies.push_back(estimate_stage(c, model, 3, world_size, ranks_per_host));
    }
  }
  return e;
}

std::string format_estimate(const Config& cfg, const MemoryEstimate& e) {
  const ZeroConfig& z = cfg.zero;
  char head[1024];
  std::snprintf(head, sizeof head,
                "model %s: %s; %.2fM parameters, largest unit %.2fM (DeepSpeed's largest layer %.2fM)\n"
                "per rank of %d: micro-batch %d x seq_len %d, accumulation %d; %s, AdamW\n"
                "zero_optimization: reduce_bucket_size %lld, stage3_prefetch_bucket_size %lld, "
                "stage3_max_live_parameters %lld, stage3_param_persistence_threshold %lld, overlap_comm %s, "
                "reduce_scatter %s\n\n",
                cfg.model.arch.c_str(), dims_str(e.dims).c_str(), static_cast<double>(e.num_params) / 1e6,
                static_cast<double>(e.largest_unit) / 1e6, static_cast<double>(e.deepspeed_largest_layer) / 1e6,
                e.world_size, cfg.micro_batch, cfg.data.seq_len,
                cfg.grad_accum, precision_name(cfg.precision.dtype), static_cast<long long>(z.reduce_bucket_size),
                static_cast<long long>(z.prefetch_bucket_size), static_cast<long long>(z.max_live_parameters),
                static_cast<long long>(z.param_persistence_threshold), z.overlap_comm ? "true" : "false",
                z.reduce_scatter ? "true" : "false");
  std::string out = head;
  constexpr size_t kWidth = 14;
  out += "stage ";
  for (size_t c = 0; c < kMemCategories; ++c) out += cell(category(c), kWidth);
  out += cell("total", kWidth);
  out += cell("DeepSpeed", kWidth);
  out += '\n';
  for (const StageEstimate& s : e.stages) {
    out += std::to_string(s.stage);
    out += s.stage == z.stage ? "*    " : "     ";
    for (size_t c = 0; c < kMemCategories; ++c) out += cell(human_bytes(s.peak[c]), kWidth);
    out += cell(human_bytes(s.total), kWidth);
    out += cell(human_bytes(s.deepspeed), kWidth);
    out += '\n';
  }
  if (!e.frozen_policies.empty()) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "\nfrozen parameters (LoRA): %.2fM of %.2fM train; zero_optimization.frozen_params at stage 3:\n",
                  static_cast<double>(e.trainable_params) / 1e6, static_cast<double>(e.num_params) / 1e6);
    out += line;
    const char* what[] = {"each rank its shard, gathered for each use", "whole on every rank, never gathered"};
    for (size_t i = 0; i < e.frozen_policies.size(); ++i) {
      const StageEstimate& s = e.frozen_policies[i];
      std::snprintf(line, sizeof line, "  %-10s%s parameters %s, total %s (%s)\n", kFrozenPolicies[i],
                    z.frozen_params == kFrozenPolicies[i] ? "*" : " ", human_bytes(s.peak_of(MemCategory::parameters)).c_str(),
                    human_bytes(s.total).c_str(), what[i]);
      out += line;
    }
  }
  {
    char line[512];
    std::snprintf(line, sizeof line, "\nactivation checkpointing at stage %d (configured: %s):\n", z.stage,
                  e.checkpointing.c_str());
    out += line;
    const size_t none = e.checkpointing_modes.empty() ? 0 : e.checkpointing_modes[0].second.peak_of(MemCategory::activations);
    for (const auto& [mode, s] : e.checkpointing_modes) {
      const size_t act = s.peak_of(MemCategory::activations);
      std::snprintf(line, sizeof line, "  %-32s activations %10s (%5.1f%% of none), total %10s\n", mode.c_str(),
                    human_bytes(act).c_str(), none ? 100.0 * static_cast<double>(act) / static_cast<double>(none) : 0.0,
                    human_bytes(s.total).c_str());
      out += line;
    }
  }
  out +=
      "\n* the configured stage. Peaks per rank during a training step (from the second on), each category's\n"
      "own; total is the peak of their sum. Reductions are taken to stay in flight until reduce_bucket_size\n"
      "forces a wait, so stage 2-3 gradients (and totals) are the bound the schedule allows: reductions that\n"
      "finish sooner free their buffers sooner. MPI's own buffers are not counted. DeepSpeed: its own GPU\n"
      "model-states estimate for the same parameters, ranks and offload (stages 2-3: DeepSpeed 0.19.8's\n"
      "estimate_zero2/3_model_states_mem_needs, 2P+18P/N and 4L+18P/N with L its largest layer, the token\n"
      "embedding; stages 0-1: the ZeRO paper's 16P and 4P+12P/N), for 16-bit parameters and gradients with fp32\n"
      "master weights. Here compute on the CPU widens to f32: the parameters and gradients the model uses are\n"
      "f32 in every precision, and bf16/fp16 add 16-bit parameter shards, wire buffers and fp32 masters.\n";
  if (cfg.train.device == "cuda" && cfg.precision.dtype == "bf16")
    out +=
        "\ntrain.device cuda in bf16: the figures are its 16-bit layout ([Note: compute in 16 bits]: parameters,\n"
        "gradients and activations in bf16 with no f32 copies or wire buffers, attention keeping each row's\n"
        "logsumexp instead of its probabilities), not yet held to a measured GPU run.\n";
  return out;
}

namespace {
// A stage's peaks as the metrics file's peak_bytes.
nlohmann::json peak_json(const StageEstimate& s) {
  nlohmann::json peak;
  for (size_t c = 0; c < kMemCategories; ++c) peak[category(c)] = s.peak[c];
  peak["total"] = s.total;
  return peak;
}
}  // namespace

std::string estimate_json(const MemoryEstimate& e) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageEstimate& s : e.stages)
    stages.push_back({{"stage", s.stage}, {"peak_bytes", peak_json(s)}, {"deepspeed_model_states", s.deepspeed}});
  nlohmann::json frozen = nlohmann::json::object();
  for (size_t i = 0; i < e.frozen_policies.size(); ++i) frozen[kFrozenPolicies[i]] = {{"peak_bytes", peak_json(e.frozen_policies[i])}};
  nlohmann::json modes = nlohmann::json::object();
  for (const auto& [mode, s] : e.checkpointing_modes) modes[mode] = {{"peak_bytes", peak_json(s)}};
  return nlohmann::json{{"world_size", e.world_size},
                        {"activation_checkpointing", {{"configured", e.checkpointing}, {"modes", modes}}},
                        {"params", e.num_params},
                        {"trainable_params", e.trainable_params},
                        {"stage3_frozen_params", frozen},
                        {"largest_unit", e.largest_unit},
                        {"deepspeed_largest_layer", e.deepspeed_largest_layer},
                        {"stages", stages}}
             .dump() +
         "\n";
}

}  // namespace zt
