#include "runtime/agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "comm/process_group.hpp"
#include "offload/checksum.hpp"

namespace zt {

namespace {

using nlohmann::json;

// A value longer than this is compared whole (through its digest) but named by its start.
constexpr size_t kShownBytes = 256;

// "rank 3", "ranks 0-2, 5".
std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + s;
}

// The values of setting `key` on every rank, grouped: "2 on ranks 0-1, 3 on rank 2".
std::string values_text(Communicator& comm, const std::string& value) {
  std::string shown = value.size() < kShownBytes ? value : value.substr(0, kShownBytes - 4) + "...";
  std::vector<uint64_t> words(kShownBytes / sizeof(uint64_t), 0);
  std::memcpy(words.data(), shown.data(), shown.size());  // zero-terminated by the padding
  const std::vector<uint64_t> all = all_gather_words(comm, words);
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // in the order first seen
  for (int r = 0; r < comm.size(); ++r) {
    const char* text = reinterpret_cast<const char*>(all.data() + static_cast<size_t>(r) * words.size());
    const std::string v(text, strnlen(text, kShownBytes));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
    if (it == groups.end()) groups.push_back({v, {r}});
    else it->second.push_back(r);
  }
  std::string s;
  for (const auto& [v, ranks] : groups) s += (s.empty() ? "" : ", ") + v + " on " + ranks_text(ranks);
  return s;
}

}  // namespace

std::vector<uint64_t> all_gather_words(Communicator& comm, const std::vector<uint64_t>& mine) {
  const auto count = static_cast<int64_t>(mine.size());
  const Tensor in = Tensor::empty({2 * count}, DType::i32, MemCategory::communication);
  const Tensor out = Tensor::empty({2 * count * comm.size()}, DType::i32, MemCategory::communication);
  std::memcpy(in.raw(), mine.data(), in.nbytes());
  comm.all_gather(in, out);
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(comm.size()));
  std::memcpy(all.data(), out.raw(), out.nbytes());
  return all;
}

std::vector<std::pair<std::string, std::string>> shared_settings(const Config& c) {
  std::vector<std::pair<std::string, std::string>> s;
  auto add = [&](std::string key, const json& v) { s.emplace_back(std::move(key), v.dump()); };

  const ModelConfig& m = c.model;
  add("model.arch", m.arch);
  for_each_dim([&](const char* key, const auto& v) { add("model." + std::string(key), v); }, m.dims);
  add("model.init_from", m.init_from ? json(*m.init_from) : json(nullptr));
  add("model.wte_units", m.wte_units);

  const DataConfig& d = c.data;
  add("data.format", d.format);
  add("data.train", d.train);
  add("data.val", d.val);
  add("data.seq_len", d.seq_len);
  add("data.shuffle", d.shuffle);
  add("data.val_fraction", d.val_fraction);
  // Chat data is rendered and tokenized on each rank: ranks given other tokenizers, templates,
  // packing or system messages would train on other rows than the ones they count together.
  add("data.tokenizer", d.tokenizer);
  add("data.chat_template", d.chat_template);
  add("data.packing", d.packing);
  add("data.system", d.system);

  const TrainConfig& t = c.train;
  add("train.steps", t.steps);
  add("train.seed", t.seed);
  add("train.val_interval", t.val_interval);
  add("train.val_batches", t.val_batches);
  add("train.save_model", t.save_model);
  add("train.trace", t.trace);
  add("train.resume", t.resume);
  add("train.device", t.device);
  add("train.skip_nonfinite_steps", t.skip_nonfinite_steps);
  add("train.attention", t.attention);

  add("train_micro_batch_size_per_gpu", c.micro_batch);
  add("gradient_accumulation_steps", c.grad_accum);
  add("gradient_clipping", c.gradient_clipping);

  const OptimizerConfig& o = c.optimizer;
  add("optimizer.type", o.type);
  add("optimizer.params.lr", o.lr);
  add("optimizer.params.betas", json::array({o.beta1, o.beta2}));
  add("optimizer.params.eps", o.eps);
  add("optimizer.params.weight_decay", o.weight_decay);

  const SchedulerConfig& sc = c.scheduler;
  add("scheduler.type", sc.type);
  add("scheduler.params.warmup_min_lr", sc.warmup_min_lr);
  add("scheduler.params.warmup_max_lr", sc.warmup_max_lr);
  add("scheduler.params.warmup_num_steps", sc.warmup_num_steps);
  add("scheduler.params.warmup_type", sc.warmup_type);
  add("scheduler.params.total_num_steps", sc.total_num_steps);
  add("scheduler.params.warmup_min_ratio", sc.warmup_min_ratio);
  add("scheduler.params.cos_min_ratio", sc.cos_min_ratio);

  const ZeroConfig& z = c.zero;
  const std::string zo = "zero_optimization.";
  add(zo + "stage", z.stage);
  add(zo + "overlap_comm", z.overlap_comm);
  add(zo + "reduce_scatter", z.reduce_scatter);
  add(zo + "reduce_bucket_size", z.reduce_bucket_size);
  add(zo + "allgather_bucket_size", z.allgather_bucket_size);
  add(zo + "stage3_prefetch_bucket_size", z.prefetch_bucket_size);
  add(zo + "stage3_max_live_parameters", z.max_live_parameters);
  add(zo + "stage3_max_reuse_distance", z.max_reuse_distance);
  add(zo + "stage3_param_persistence_threshold", z.param_persistence_threshold);
  add(zo + "sub_group_size", z.sub_group_size);
  add(zo + "stage3_gather_16bit_weights_on_model_save", z.gather_16bit_on_save);
  add(zo + "frozen_params", z.frozen_params);
  add(zo + "hybrid", z.hybrid);
  add(zo + "shard_group_size", z.shard_group_size);
  add(zo + "zero_hpz_partition_size", z.hpz_partition_size);
  const ActivationCheckpointing& ac = c.activation_checkpointing;
  add("activation_checkpointing", ac.describe());
  const LoraConfig& l = c.lora;
  add("lora.r", l.r);
  add("lora.alpha", l.alpha);
  add("lora.dropout", l.dropout);
  add("lora.target_modules", l.target_modules);
  add("lora.init", l.init);
  add("lora.use_rslora", l.use_rslora);
  add("lora.init_from", l.init_from);
  // Where the states live and in what order they move; the paths and pinning are the host's.
  add(zo + "offload_optimizer.device", z.offload_optimizer.device);
  add(zo + "offload_optimizer.buffer_count", z.offload_optimizer.buffer_count);
  add(zo + "offload_optimizer.pipeline_read", z.offload_optimizer.pipeline_read);
  add(zo + "offload_optimizer.pipeline_write", z.offload_optimizer.pipeline_write);
  add(zo + "offload_optimizer.overlap_step", z.offload_optimizer.overlap_step);
  add(zo + "offload_param.device", z.offload_param.device);
  add(zo + "offload_param.buffer_count", z.offload_param.buffer_count);
  add(zo + "offload_param.buffer_size", z.offload_param.buffer_size);
  add(zo + "offload_param.max_in_cpu", z.offload_param.max_in_cpu);

  const PrecisionConfig& p = c.precision;
  add("bf16.enabled", p.dtype == "bf16");
  add("fp16.enabled", p.dtype == "f16");
  add("fp16.loss_scale", p.loss_scale);
  add("fp16.initial_scale_power", p.initial_scale_power);
  add("fp16.loss_scale_window", p.loss_scale_window);
  add("fp16.hysteresis", p.hysteresis);
  add("fp16.consecutive_hysteresis", p.consecutive_hysteresis);
  add("fp16.min_loss_scale", p.min_loss_scale);

  add("checkpoint.dir", c.checkpoint.dir);
  add("checkpoint.save_interval", c.checkpoint.save_interval);
  add("checkpoint.keep_last", c.checkpoint.keep_last);
  add("checkpoint.overwrite", c.checkpoint.overwrite);
  return s;
}

void agree_on_settings(const Config& cfg, Communicator& comm) {
  const int n = comm.size();
  if (n == 1) return;
  const auto settings = shared_settings(cfg);
  std::vector<uint64_t> digests;
  for (const auto& [key, value] : settings) {
    const std::string both = key + '\0' + value;
    digests.push_back(checksum(both.data(), both.size()));
  }
  const uint64_t whole = checksum(digests.data(), digests.size() * sizeof(uint64_t));

  const std::vector<uint64_t> heads = all_gather_words(comm, {digests.size(), whole});
  bool same = true;
  for (size_t r = 1; r < static_cast<size_t>(n); ++r) same = same && heads[2 * r] == heads[0] && heads[2 * r + 1] == heads[1];
  if (same) return;
  // Every rank ends here with the same finding: rank 0 says it ([Note: failing together]).
  mark_failing_together(comm.rank() == 0);
  for (size_t r = 0; r < static_cast<size_t>(n); ++r)
    if (heads[2 * r] != digests.size())
      throw ConfigError("config: the ranks disagree on which settings a run has (" + std::to_string(digests.size()) +
                        " on rank " + std::to_string(comm.rank()) + ", " + std::to_string(heads[2 * r]) + " on rank " +
                        std::to_string(r) + "): they run different ztrain builds");

  const std::vector<uint64_t> each = all_gather_words(comm, digests);
  size_t k = 0;
  auto differs = [&](size_t i) {
    for (int r = 1; r < n; ++r)
      if (each[static_cast<size_t>(r) * digests.size() + i] != each[i]) return true;
    return false;
  };
  while (k + 1 < digests.size() && !differs(k)) ++k;
  throw ConfigError("config: " + settings[k].first + ": the ranks disagree: " + values_text(comm, settings[k].second) +
                    " (every rank must run the same configuration)");
}

}  // namespace zt
