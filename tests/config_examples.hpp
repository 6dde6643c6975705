// A value other than the default for every setting of the configuration's table, with the keys a
// valid config then also needs ([Note: one declaration per key] in runtime/config_keys.hpp):
// test_config reads each back, test_agreement has ranks differ in each.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/registry.hpp"
#include "runtime/config_keys.hpp"

namespace zt::test {

struct KeyExample {
  nlohmann::json value;      // given in the file
  nlohmann::json reads_as;   // key_value() of the parsed config
  std::vector<std::string> context;  // --set edits the value needs (the key's section's other keys)
};

// The --set edits a key's example needs to be valid.
inline std::vector<std::string> example_context(const std::string& key) {
  const auto under = [&](const char* prefix) { return key.starts_with(prefix); };
  const std::vector<std::string> llama = {"model.arch=llama"};
  if (key == "data.val_fraction") return {"data.format=bytes", "data.val="};
  if (under("data.") && (key.ends_with("tokenizer") || key.ends_with("template") || key.ends_with("packing") || key.ends_with("system")))
    return {"data.format=chat", "data.tokenizer=t/tokenizer.json"};
  if (key == "train.val_interval") return {"data.val=v"};
  if (key == "train.attention") return {"train.device=cuda"};
  if (key == "scheduler.params.total_num_steps") return {"scheduler.type=WarmupDecayLR", "scheduler.params.total_num_steps=2000"};
  if (key == "optimizer.params.adam_w_mode") return {"optimizer.type=Adam"};
  if (key == "scheduler.params.warmup_min_ratio" || key == "scheduler.params.cos_min_ratio")
    return {"scheduler.type=WarmupCosineLR", "scheduler.params.total_num_steps=5000"};
  if (under("scheduler.params.")) return {"scheduler.type=WarmupLR"};
  if (key == "zero_optimization.shard_group_size") return {"zero_optimization.sharding_strategy=HYBRID_SHARD"};
  if (key == "zero_optimization.zero_hpz_partition_size" || under("zero_optimization.offload_"))
    return {"zero_optimization.stage=3"};
  if (key == "lora.init_from") return {"lora.r=4"};
  if (key == "activation_checkpointing.selective_ac_option") return {"activation_checkpointing.mode=selective"};
  if (key == "activation_checkpointing.cpu_checkpointing") return {"activation_checkpointing.mode=full"};
  if (key == "checkpoint.save_interval") return {"checkpoint.dir=ck"};
  if (under("model.")) {
    const KeySpec* k = find_key(key);
    // The dimensions after GPT-2's six: the first architecture that has the dimension.
    if (k && std::holds_alternative<DimField>(k->field) && std::get<DimField>(k->field).index >= kGpt2DimCount)
      for (const ModelSpec& s : model_specs())
        if (s.has_dim(std::string_view(key).substr(6))) return {"model.arch=" + s.arch};
    if (key == "model.rope_scaling.rope_type") return llama;
  }
  return {};
}

// A value for k other than its default, valid with example_context(k.key).
inline KeyExample example_of(const KeySpec& k) {
  using nlohmann::json;
  static const std::map<std::string, KeyExample> special = {
      {"model.arch", {"llama", "llama", {}}},
      {"model.init_from", {"start.bin", "start.bin", {}}},
      {"model.head_dim", {64, 64, {"model.arch=llama"}}},
      {"model.pad_token_id", {0, 0, {"model.arch=llama"}}},
      {"model.rope_scaling.rope_type", {"llama3", "llama3", {"model.arch=llama"}}},
      {"optimizer.params.betas", {json::array({0.8, 0.9}), json::array({0.8, 0.9}), {}}},
      {"scheduler.type", {"WarmupLR", "WarmupLR", {}}},
      {"scheduler.params.total_num_steps", {5000, 5000, {}}},
      {"zero_optimization.sharding_strategy", {"HYBRID_SHARD", "HYBRID_SHARD", {}}},
      {"zero_optimization.mics_shard_size", {2, 2, {}}},
      {"lora.target_modules", {json::array({"q_proj"}), json::array({"q_proj"}), {}}},
      {"activation_checkpointing.mode", {"selective", "selective", {}}},
      {"activation_checkpointing.selective_ac_option", {3, 3, {"activation_checkpointing.mode=selective"}}},
      {"bf16.enabled", {true, true, {}}},
      {"fp16.enabled", {true, true, {}}},
      {"aio.block_size", {8192, 8192, {}}},
      {"train.resume", {"ck", "ck", {}}},
      // Both of DeepSpeed's names are AdamW here: every accepted value reads the same.
      {"optimizer.type", {"Adam", "AdamW", {}}},
  };
  if (const auto it = special.find(k.key); it != special.end()) {
    KeyExample e = it->second;
    if (e.context.empty()) e.context = example_context(k.key);
    return e;
  }
  const json def = key_value(k, Config{});
  json v;
  if (!k.allowed.empty()) {
    for (std::string_view a : k.allowed)
      if (def != json(a)) {
        v = std::string(a);
        break;
      }
  } else if (def.is_boolean()) {
    v = !def.get<bool>();
  } else if (def.is_string()) {
    std::string other = def.get<std::string>();
    other += ".x";  // (not "x" + s: GCC 12 warns wrongly about that operator+, -Wrestrict)
    v = other;
  } else if (def.is_number()) {
    const double d = def.get<double>();
    const bool integral = def.is_number_integer();
    for (double c : {d * 2, d + 1, integral ? d + 2 : d * 0.5, integral ? d - 1 : 0.5}) {
      const KeyRange& r = k.range;
      const bool in = (r.lo_open ? c > r.lo : c >= r.lo) && (r.hi_open ? c < r.hi : c <= r.hi);
      if (c != d && in) {
        v = integral ? json(static_cast<int64_t>(c)) : json(c);
        break;
      }
    }
  }
  return {v, v, example_context(k.key)};
}

}  // namespace zt::test
