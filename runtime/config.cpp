#include "runtime/config.hpp"

#include "runtime/config_keys.hpp"

#include "files/json_text.hpp"
#include "models/model_dims.hpp"
#include "models/registry.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>
#include <type_traits>
#include <utility>

namespace zt {
namespace {

using nlohmann::json;

// DeepSpeed schedulers ztrain lacks, told apart from typos.
constexpr std::string_view kSchedulersNotYet[] = {"OneCycle", "LRRangeTest"};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw ConfigError("config: " + path + ": " + what);
}

// Values are echoed as JSON, so a string shows its quotes; huge ones are cut to keep one line
// ([Note: JSON from files] in files/json_text.hpp).
std::string show(const json& v) { return show_json(v); }

// No key of ztrain's or DeepSpeed's nests deeper than 4 (optimizer.params.betas[0]); values are
// refused well before a depth that would cost real time or stack anywhere they are walked. For
// nlohmann's parse callback, whose depth counts the containers already open.
constexpr int kMaxDepth = 32;
bool opens_too_deep(int depth, json::parse_event_t event) {
  return (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= kMaxDepth;
}
const std::string kTooDeep = "arrays or objects nest more than " + std::to_string(kMaxDepth) + " deep (no key nests more than 4)";

// In constraint messages "0" reads better than JSON's "0.0"; type errors keep show() so a float
// given for an integer is visible.
std::string num(double v) { return number_text(v); }

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

// One config file being read ([Note: one declaration per key] in runtime/config_keys.hpp): keys are
// looked up only by their rows' names, so a key without a row cannot be read.
class Reader {
 public:
  explicit Reader(const json& root) : root_(root) {}

  const json& root() const { return root_; }

  // The file's value of a declared key or section; nullptr where absent (or where a section on the
  // way is no object, which check_keys reports).
  const json* raw(std::string_view key) const {
    if (!find_key(key) && !is_config_section(key))
      throw std::logic_error("config: " + std::string(key) + " is read but not declared in runtime/config_table.cpp");
    const json* at = &root_;
    for (size_t start = 0;;) {
      const size_t dot = key.find('.', start);
      if (!at->is_object()) return nullptr;
      const auto it = at->find(std::string(key.substr(start, dot == std::string_view::npos ? dot : dot - start)));
      if (it == at->end()) return nullptr;
      at = &*it;
      if (dot == std::string_view::npos) return at;
      start = dot + 1;
    }
  }
  bool given(std::string_view key) const { return raw(key) != nullptr; }
  // A string key's value, type-checked; "" when absent.
  std::string text(std::string_view key) const {
    const json* v = raw(key);
    if (!v) return "";
    if (!v->is_string()) fail(std::string(key), "expected a string, got " + show(*v));
    return v->get<std::string>();
  }

 private:
  const json& root_;
};

// The range or allowed values in words, as the key's row gives them.
std::string allowed_text(std::string_view key) { return key_range(*find_key(key)); }

// A section's keys, in the table's order, that a file may give (those that apply to it).
std::vector<std::string> children(const Reader& r, const std::string& section) {
  std::vector<std::string> names;
  const std::string prefix = section.empty() ? "" : section + ".";
  for (const KeySpec& k : config_table()) {
    if (!k.key.starts_with(prefix) || (k.applies && !k.applies(r.root()))) continue;
    const std::string rest = k.key.substr(prefix.size());
    const std::string name = rest.substr(0, rest.find('.'));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

// What the unknown-key message adds for sections whose keys depend on another key or differ
// from a sibling's.
std::string unknown_note(const Reader& r, const std::string& section, const std::vector<std::string>& known) {
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  if (section == "scheduler.params") return " for " + r.text("scheduler.type") + ", which takes: " + list;
  if (section.ends_with(".offload_param") || section.ends_with(".offload_optimizer"))
    return ", which " + section.substr(section.rfind('.') + 1) + " does not take (it takes: " + list + ")";
  return "";
}

// Every key of the file has a row (and applies), every section is an object: a misspelt key is
// never silently ignored, and the rows double as the candidates for "did you mean". The top
// level's sections are checked one at a time, as they are read (descend false for the top level).
void check_keys(const Reader& r, const json& j, const std::string& path, bool descend = true) {
  if (!j.is_object()) fail(path.empty() ? "top level" : path, "expected an object, got " + show(j));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = join(path, it.key());
    // A name with a dot is no key, though its path may read like one ("zero_optimization.stage"
    // given at the top level).
    const KeySpec* k = it.key().find('.') == std::string::npos ? find_key(key) : nullptr;
    if (k ? !k->applies || k->applies(r.root()) : it.key().find('.') == std::string::npos && is_config_section(key)) {
      if (!k && descend) check_keys(r, it.value(), key);
      continue;
    }
    const std::vector<std::string> known = children(r, path);
    std::string best;
    size_t best_d = 3;
    for (const auto& c : known) {
      const size_t d = edit_distance(it.key(), c);
      // 2*d <= size keeps "x" from suggesting "lr".
      if (d < best_d && 2 * d <= it.key().size()) best = c, best_d = d;
    }
    fail(key, "unknown key" + (best.empty() ? "" : " (did you mean '" + best + "'?)") + unknown_note(r, path, known));
  }
}

// The top-level section a key lies in; "" for a top-level key.
std::string_view section_of(std::string_view key) {
  const size_t dot = key.find('.');
  return dot == std::string_view::npos ? "" : key.substr(0, dot);
}

// The rows of one top-level section ("": the top-level keys) that the file gives and the generic
// reader can take: its type (and 32-bit fit), a refused key's refusal, a deprecated name's warning,
// the value into its field. Keys read by code below are type-checked here where their row says
// their type.
void read_rows(const Reader& r, Config& c, std::string_view section) {
  for (const KeySpec& k : config_table()) {
    if (section_of(k.key) != section || k.custom || (k.applies && !k.applies(r.root()))) continue;
    const json* v = r.raw(k.key);
    if (!v || (k.nullable && v->is_null())) continue;
    if (const char* want = key_type_error(k, *v); want && std::holds_alternative<std::monostate>(k.field))
      fail(k.key, std::string("expected ") + want + ", got " + show(*v));
    if (k.role == KeyRole::refused) {
      if (!k.accepts || *v != json::parse(k.accepts)) fail(k.key, k.refusal);
      continue;
    }
    if (k.warning) std::fprintf(stderr, "ztrain: warning: config: %s\n", k.warning);
    read_key_value(k, c, *v);
  }
}

// The rows' ranges and allowed values, for the keys with a field.
void check_ranges(const Config& c) {
  for (const KeySpec& k : config_table()) {
    if (k.role != KeyRole::value || (k.checked_when && !k.checked_when(c))) continue;
    const json v = key_value(k, c);
    if (!k.allowed.empty() && v.is_string() &&
        std::find(k.allowed.begin(), k.allowed.end(), v.get<std::string>()) == k.allowed.end())
      fail(k.key, "expected " + key_range(k) + ", got " + show(v));
    const KeyRange& range = k.range;
    if (!range.bounded() || !v.is_number()) continue;
    const double d = v.get<double>();
    const bool above = range.lo_open ? d > range.lo : d >= range.lo, below = range.hi_open ? d < range.hi : d <= range.hi;
    if (!above || !below) fail(k.key, "must be " + key_range(k) + ", got " + num(d));
  }
}

// What the file gave explicitly, where the struct's default cannot tell.
struct Seen {
  bool data_train = false, val_fraction = false, train_batch_size = false;
  bool chat_keys = false;
  bool precision = false;  // a bf16 (bfloat16) or fp16 section was given
  bool val_interval = false;
};

Seen seen_in(const Reader& r) {
  Seen s;
  s.data_train = r.given("data.train");
  s.val_fraction = r.given("data.val_fraction");
  s.train_batch_size = r.given("train_batch_size");
  for (const char* k : {"data.tokenizer", "data.chat_template", "data.packing", "data.system"}) s.chat_keys |= r.given(k);
  s.precision = r.given("bf16") || r.given("bfloat16") || r.given("fp16");
  s.val_interval = r.given("train.val_interval");
  return s;
}

// [Note: one declaration per key]: the keys below decide which other keys a file may have
// (a scheduler's params, Adam's adam_w_mode), so they are checked before the keys are.
void read_optimizer_and_scheduler_types(const Reader& r, Config& c) {
  if (r.given("optimizer.type")) {
    const std::string type = r.text("optimizer.type");
    if (lower(type) != "adamw" && lower(type) != "adam")
      fail("optimizer.type", show(type) + " is not implemented yet (ztrain has \"AdamW\")");
  }
  const json* s = r.raw("scheduler");
  if (!s || !s->is_object()) return;
  if (!r.given("scheduler.type")) fail("scheduler.type", "required key missing");
  SchedulerConfig& sc = c.scheduler;
  sc.type = r.text("scheduler.type");
  for (std::string_view t : kSchedulersNotYet)
    if (sc.type == t) fail("scheduler.type", show(sc.type) + " is a DeepSpeed scheduler that ztrain does not implement yet");
  if (sc.type != "WarmupLR" && sc.type != "WarmupDecayLR" && sc.type != "WarmupCosineLR")
    fail("scheduler.type", "unknown scheduler " + show(sc.type) + " (expected WarmupLR, WarmupDecayLR or WarmupCosineLR)");
  if (sc.type != "WarmupLR" && !r.given("scheduler.params.total_num_steps"))
    fail("scheduler.params.total_num_steps", "required key missing (" + sc.type + " needs it)");
}

void read_model(const Reader& r, ModelConfig& m) {
  for_each_dim([&](const char* key, auto&) { if (r.given("model." + std::string(key))) m.given.emplace_back(key); }, m.dims);
  if (const json* v = r.raw("model.init_from"); v && !v->is_null()) {
    if (!v->is_string()) fail("model.init_from", "expected a string or null, got " + show(*v));
    if (v->get_ref<const std::string&>().empty()) fail("model.init_from", "must be a path or null, got \"\"");
    m.init_from = v->get<std::string>();
  }
}

void read_train(const Reader& r, TrainConfig& t) {
  // A folder, or true: the checkpoint root (checkpoint.dir), resolved in check_values.
  if (const json* v = r.raw("train.resume"); v && v->is_boolean()) {
    if (v->get<bool>()) t.resume = "true";
  } else {
    t.resume = r.text("train.resume");
  }
}

void read_betas(const Reader& r, OptimizerConfig& o) {
  const json* v = r.raw("optimizer.params.betas");
  if (!v) return;
  if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number() || !(*v)[1].is_number())
    fail("optimizer.params.betas", "expected an array of 2 numbers, got " + show(*v));
  for (size_t i = 0; i < 2; ++i) {
    const double b = (*v)[i].get<double>();
    if (!(b >= 0.0 && b < 1.0)) fail("optimizer.params.betas[" + std::to_string(i) + "]", "must be in [0, 1), got " + num(b));
  }
  o.beta1 = (*v)[0].get<double>();
  o.beta2 = (*v)[1].get<double>();
}

// FSDP's sharding strategies and the stage each one is.
constexpr std::pair<std::string_view, int> kShardingStrategies[] = {
    {"NO_SHARD", 0}, {"SHARD_GRAD_OP", 2}, {"FULL_SHARD", 3}, {"HYBRID_SHARD", 3}, {"_HYBRID_SHARD_ZERO2", 2}};

template <class T>
void at_least(const std::string& path, T v, T min) {
  if (v < min) fail(path, "must be >= " + num(min) + ", got " + num(v));
}

void positive(const std::string& path, double v) {
  if (!(v > 0.0)) fail(path, "must be > 0, got " + num(v));
}

// offload_optimizer (param false) or offload_param: DeepSpeed's older `pipeline` for both of
// pipeline_read and pipeline_write (each given on its own wins), nvme's path.
void read_offload(const Reader& r, const std::string& s, OffloadConfig& o, bool param) {
  if (!param) {
    if (const json* v = r.raw(s + ".pipeline")) {
      if (!r.given(s + ".pipeline_read")) o.pipeline_read = v->get<bool>();
      if (!r.given(s + ".pipeline_write")) o.pipeline_write = v->get<bool>();
    }
  }
  if (o.device == "nvme" && o.nvme_path.empty()) fail(s + ".nvme_path", "required with device \"nvme\"");
}

void read_zero(const Reader& r, ZeroConfig& z) {
  const std::string s = "zero_optimization.";
  const bool has_stage = r.given(s + "stage");
  std::string strategy;
  if (r.given(s + "sharding_strategy")) {
    strategy = r.text(s + "sharding_strategy");
    const auto* it = std::find_if(std::begin(kShardingStrategies), std::end(kShardingStrategies),
                                  [&](const auto& e) { return e.first == strategy; });
    if (it == std::end(kShardingStrategies))
      fail(s + "sharding_strategy", "expected " + allowed_text(s + "sharding_strategy") + ", got " + show(strategy));
    if (has_stage && it->second != z.stage)
      fail(s + "sharding_strategy", show(strategy) + " is stage " + std::to_string(it->second) +
                                        ", but zero_optimization.stage is " + std::to_string(z.stage));
    z.stage = it->second;
    z.hybrid = strategy.find("HYBRID") != std::string::npos;
  }
  // [Note: shard groups]: the group size, FSDP's way (shard_group_size with a hybrid strategy,
  // ztrain's key for the device mesh's shard dimension) or DeepSpeed's (mics_shard_size, -1 off).
  const bool has_group = r.given(s + "shard_group_size");
  if (const json* v = r.raw(s + "mics_shard_size"); v && *v != json(-1)) {
    if (v->get<int64_t>() > INT_MAX) fail(s + "mics_shard_size", show(*v) + " does not fit in a 32-bit integer");
    const int mics = static_cast<int>(std::max<int64_t>(v->get<int64_t>(), INT_MIN));
    if (mics < 1) fail(s + "mics_shard_size", "must be >= 1 (or -1: off), got " + num(mics));
    if (has_stage && z.stage != 3) fail(s + "mics_shard_size", "needs zero_optimization.stage 3, got stage " + num(z.stage));
    if (!strategy.empty() && strategy != "HYBRID_SHARD")
      fail(s + "mics_shard_size", "is hybrid sharding at stage 3, but sharding_strategy is " + show(strategy));
    if (has_group && z.shard_group_size != mics)
      fail(s + "mics_shard_size", num(mics) + " and shard_group_size " + num(z.shard_group_size) + " disagree");
    z.stage = 3, z.hybrid = true, z.shard_group_size = mics;
  }
  if (has_group && !z.hybrid)
    fail(s + "shard_group_size", "applies to sharding_strategy \"HYBRID_SHARD\" or \"_HYBRID_SHARD_ZERO2\" (or mics_shard_size) only");
  if (has_group && z.shard_group_size < 1) fail(s + "shard_group_size", "must be >= 1, got " + num(z.shard_group_size));
  if (z.hpz_partition_size > 1 && z.stage != 3)
    fail(s + "zero_hpz_partition_size", "needs zero_optimization.stage 3, got stage " + num(z.stage));
  if (z.hpz_partition_size > 1 && z.hybrid)
    fail(s + "zero_hpz_partition_size", "with hybrid sharding: the shard group already keeps every gather within it");
  read_offload(r, s + "offload_optimizer", z.offload_optimizer, false);
  read_offload(r, s + "offload_param", z.offload_param, true);
  if (z.offload_optimizer.enabled() && z.stage == 0)
    fail(s + "offload_optimizer.device", "needs zero_optimization.stage 1, 2 or 3 (stage 0 has no shard to offload)");
  if (z.offload_param.enabled() && z.stage != 3)
    fail(s + "offload_param.device", "needs zero_optimization.stage 3, got stage " + std::to_string(z.stage));
  if (z.offload_param.enabled() && z.hpz_partition_size > 1)
    fail(s + "zero_hpz_partition_size", "with offload_param is not implemented yet (the secondary shard would stay on the device)");
}

// PEFT's target_modules: a list of names, or one ("all-linear").
void read_lora(const Reader& r, LoraConfig& l) {
  if (r.given("lora.init_from") && l.init_from.empty()) fail("lora.init_from", "must be a PEFT adapter folder, got \"\"");
  if (const json* v = r.raw("lora.target_modules")) {
    if (v->is_string()) {
      l.target_modules = {v->get<std::string>()};
    } else {
      if (!v->is_array() || v->empty()) fail("lora.target_modules", "expected a list of module names, got " + show(*v));
      for (const json& e : *v) {
        if (!e.is_string() || e.get_ref<const std::string&>().empty())
          fail("lora.target_modules", "expected module names (strings), got " + show(e));
        l.target_modules.push_back(e.get<std::string>());
      }
    }
  }
  if (l.r == 0 && !l.init_from.empty()) fail("lora.init_from", "starts adapters, and lora.r is 0 (no LoRA)");
}

// DeepSpeed's activation_checkpointing section, which turns checkpointing on (DeepSpeed's model
// code calls its checkpoint(); here the section is that call), with torchtitan's mode keys:
// mode "full" (the default), "selective" with selective_ac_option "op" or a block frequency k,
// or "none". DeepSpeed's other keys change nothing here and are taken as such.
void read_activation_checkpointing(const Reader& r, ActivationCheckpointing& a) {
  const std::string s = "activation_checkpointing.";
  if (!r.given("activation_checkpointing")) return;
  using Mode = ActivationCheckpointing::Mode;
  const std::string mode = r.given(s + "mode") ? r.text(s + "mode") : "full";
  if (mode != "full" && mode != "selective" && mode != "none")
    fail(s + "mode", "expected " + allowed_text(s + "mode") + ", got " + show(mode));
  std::string option = "2";  // torchtitan's default
  if (const json* v = r.raw(s + "selective_ac_option")) {
    if (mode != "selective") fail(s + "selective_ac_option", "applies to mode \"selective\", and mode is " + show(mode));
    if (v->is_number_integer()) option = std::to_string(v->get<int64_t>());
    else if (v->is_string()) option = v->get<std::string>();
    else fail(s + "selective_ac_option", "expected \"op\" or a block frequency k >= 1, got " + show(*v));
  }
  a.mode = mode == "full" ? Mode::full : mode == "none" ? Mode::none : option == "op" ? Mode::selective_op : Mode::selective_block;
  if (a.mode == Mode::selective_block) {
    size_t used = 0;
    long k = 0;
    try {
      k = std::stol(option, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != option.size() || k < 1 || k > 1'000'000)
      fail(s + "selective_ac_option", "expected \"op\" or a block frequency k >= 1, got " + show(option));
    a.every = static_cast<int>(k);
  }
  if (a.cpu_checkpointing && a.mode == Mode::none)
    fail(s + "cpu_checkpointing", "moves checkpoints to host memory, and mode is \"none\"");
}

// DeepSpeed's aio section: O_DIRECT's block size.
void read_aio(const AioConfig& a) {
  if (a.block_size <= 0 || a.block_size % 4096 != 0)
    fail("aio.block_size", "must be a positive multiple of 4096 (O_DIRECT), got " + num(static_cast<double>(a.block_size)));
}

// DeepSpeed's tensorboard and csv_monitor sections.
void read_monitor(const char* key, const MonitorConfig& m) {
  if (m.enabled && m.output_path.empty() && m.job_name.empty())
    fail(std::string(key) + ".job_name", "and output_path are both empty: name the folder the files go to");
}

// DeepSpeed's monitors that send to a network service: refused when enabled (a section with
// enabled false, as DeepSpeed configs often carry, is accepted and not read further).
void read_service_monitor(const Reader& r, const char* key, const char* service) {
  const json* v = r.raw(key);
  if (!v) return;
  if (!v->is_object()) fail(key, "expected an object, got " + show(*v));
  const auto enabled = v->find("enabled");
  if (enabled != v->end() && *enabled != json(false))
    fail(std::string(key) + ".enabled", std::string("is DeepSpeed's ") + service +
                                            " monitor, which sends to a network service; ztrain writes the same "
                                            "scalars to files: the tensorboard and csv_monitor sections, and train.metrics");
}

// bf16 / bfloat16 (DeepSpeed takes either name) and fp16.
void read_precision(const Reader& r, PrecisionConfig& p) {
  if (r.given("bf16") && r.given("bfloat16")) fail("bfloat16", "given together with bf16 (DeepSpeed takes either name, not both)");
  const std::string bf16_key = r.given("bfloat16") ? "bfloat16" : "bf16";
  const json* b = r.raw(bf16_key + ".enabled");
  const json* f = r.raw("fp16.enabled");
  const bool bf16 = b && b->get<bool>(), fp16 = f && f->get<bool>();
  if (bf16 && fp16) fail("fp16.enabled", "and " + bf16_key + ".enabled are both true; choose one");
  p.dtype = bf16 ? "bf16" : fp16 ? "f16" : "f32";
}

// The keys read by code, and their rules that involve one section's keys.
void read_by_code(const Reader& r, Config& c) {
  read_model(r, c.model);
  read_train(r, c.train);
  c.optimizer.type = "AdamW";  // DeepSpeed's "Adam" defaults to adam_w_mode true, decoupled weight decay: AdamW
  read_betas(r, c.optimizer);
  read_zero(r, c.zero);
  read_lora(r, c.lora);
  read_activation_checkpointing(r, c.activation_checkpointing);
  read_precision(r, c.precision);
  if (c.checkpoint.save_interval > 0 && c.checkpoint.dir.empty()) fail("checkpoint.dir", "required with checkpoint.save_interval");
  read_aio(c.aio);
  read_monitor("tensorboard", c.tensorboard);
  read_monitor("csv_monitor", c.csv_monitor);
  read_service_monitor(r, "wandb", "Weights & Biases");
  read_service_monitor(r, "comet", "Comet");
}

// The dimensions' own ranges, and the keys of dims the architecture lacks refused (GPT-2 has no
// use for the Llama family's) rather than ignored; then the architecture's own relations.
void check_model_dims(ModelConfig& m, const std::function<bool(std::string_view)>& known) {
  const ModelSpec& spec = model_spec(m.arch);
  int i = 0;
  for_each_dim(
      [&](const char* key, auto& v) {
        const bool gpt2_dim = i++ < kGpt2DimCount;
        const std::string path = "model." + std::string(key);
        if (!spec.has_dim(key) && std::find(m.given.begin(), m.given.end(), key) != m.given.end())
          fail(path, "does not apply to " + spec.family + " (model.arch " + show(m.arch) + ")");
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, int>)
          at_least(path, v, gpt2_dim ? 1 : std::string_view(key) == "pad_token_id" ? -1 : 0);
      },
      m.dims);
  const ModelDims& d = m.dims;
  positive("model.rms_norm_eps", d.rms_norm_eps);
  positive("model.rope_theta", d.rope_theta);
  const RopeScaling& r = d.rope_scaling;
  if (r.rope_type != "default" && r.rope_type != "llama3")
    fail("model.rope_scaling.rope_type", "expected \"default\" or \"llama3\", got " + show(r.rope_type));
  if (r.rope_type == "llama3") {
    positive("model.rope_scaling.factor", r.factor);
    positive("model.rope_scaling.low_freq_factor", r.low_freq_factor);
    if (!(r.high_freq_factor > r.low_freq_factor))
      fail("model.rope_scaling.high_freq_factor", "must be > low_freq_factor " + num(r.low_freq_factor) + ", got " +
                                                      num(r.high_freq_factor));
    at_least("model.rope_scaling.original_max_position_embeddings", r.original_max_position_embeddings, 1);
  }
  if (known("n_head") && known("n_kv_head") && d.n_kv_head > 0 && d.n_head % d.n_kv_head != 0)
    fail("model.n_kv_head", show(d.n_kv_head) + " does not divide model.n_head " + show(d.n_head));
  spec.check_dims(d, known, [](const std::string& key, const std::string& what) { fail("model." + key, what); });
}

// Runs after every section was read and checked for unknown keys, so a typo is reported as such
// rather than as the constraint its default happens to break.
void check_values(Config& c, const Seen& seen, BatchSource batches) {
  if (c.train.resume == "true") {
    if (c.checkpoint.dir.empty()) fail("train.resume", "true (resume from checkpoint.dir) needs checkpoint.dir");
    c.train.resume = c.checkpoint.dir;
  }
  ModelConfig& m = c.model;
  DataConfig& d = c.data;
  auto given = [&](std::string_view key) {
    return std::find(m.given.begin(), m.given.end(), key) != m.given.end();
  };
  // With init_from the checkpoint supplies the dimensions not given, so relations between them
  // are only checked where both sides are known.
  auto known = [&](std::string_view key) { return !m.init_from || given(key); };

  if (!is_model_arch(m.arch)) fail("model.arch", show(m.arch) + " is not implemented (expected " + model_archs_text() + ")");
  if (seen.chat_keys && d.format != "chat")
    fail("data", "tokenizer, chat_template, packing and system apply to data.format \"chat\" only");
  if (d.format == "chat") {
    if (d.tokenizer.empty() && m.init_from) d.tokenizer = *m.init_from;  // GGUF files and HF folders carry theirs
    if (d.tokenizer.empty())
      fail("data.tokenizer", "chat data needs a tokenizer: a tokenizer.json (or its folder), a GGUF file or a "
                             ".tiktoken file (model.init_from's is taken when it is one)");
    // data.chat_template is checked by the loader, which knows the templates (runtime/text/).
  }
  if (d.format == "bytes") {
    if (given("vocab_size") && m.dims.vocab_size != 256)
      fail("model.vocab_size", "must be 256 for data.format \"bytes\", got " + show(m.dims.vocab_size));
    m.dims.vocab_size = 256;
  }
  // llm.c pads GPT-2's 50257 to 50304, a multiple of 128, for its kernels; a vocabulary given
  // without its padding is padded the same way (a byte-level 256 stays 256, not 50304: 200x the
  // head's work).
  if (!given("padded_vocab_size") && m.dims.vocab_size > 0)
    m.dims.padded_vocab_size = padded_vocab(m.dims.vocab_size);
  check_model_dims(m, known);
  if (known("n_embd") && known("n_head") && (!model_spec(m.arch).has_dim("head_dim") || !known("head_dim") || m.dims.head_dim == 0) &&
      m.dims.n_embd % m.dims.n_head != 0)
    fail("model.n_embd", show(m.dims.n_embd) + " is not divisible by model.n_head " + show(m.dims.n_head));
  if (known("vocab_size") && known("padded_vocab_size") && m.dims.padded_vocab_size < m.dims.vocab_size)
    fail("model.padded_vocab_size", show(m.dims.padded_vocab_size) + " must be >= model.vocab_size " + show(m.dims.vocab_size));
  if (m.wte_units < 0) fail("model.wte_units", "must be >= 0 (0: automatic), got " + show(m.wte_units));
  if (m.wte_units > 0 && known("padded_vocab_size") && m.dims.padded_vocab_size % m.wte_units != 0)
    fail("model.wte_units", show(m.wte_units) + " does not divide model.padded_vocab_size " +
                                show(m.dims.padded_vocab_size));

  if (!model_spec(m.arch).llmc && !c.train.save_model.empty() && !c.train.save_model.ends_with(".safetensors"))
    fail("train.save_model", show(c.train.save_model) + ": llm.c's format holds GPT-2 only; name a .safetensors file "
                             "for model.arch " + show(m.arch));
  if (!seen.data_train && batches == BatchSource::data) fail("data.train", "required key missing");
  if (seen.data_train && d.train.empty()) fail("data.train", "must not be empty");
  if (known("max_seq_len") && d.seq_len > m.dims.max_seq_len)
    fail("data.seq_len", show(d.seq_len) + " must be <= model.max_seq_len " + show(m.dims.max_seq_len));
  if (seen.val_fraction && d.format != "bytes" && d.format != "chat")
    fail("data.val_fraction", "only applies to data.format \"bytes\" and \"chat\"");
  if (seen.val_fraction && !d.val.empty()) fail("data.val_fraction", "has no effect when data.val is set");

  const TrainConfig& t = c.train;
  if (t.device == "cuda" && !seen.precision) c.precision.dtype = "bf16";
  if (t.attention == "cudnn" && t.device != "cuda")
    fail("train.attention", "\"cudnn\" (cuDNN's fused attention) runs on cuda only; train.device is " + show(t.device));
  if (t.attention == "cudnn" && c.precision.dtype != "bf16")
    fail("train.attention", std::string("\"cudnn\" computes in bf16 only: it needs bf16.enabled (the default on cuda), "
                                        "not ") + (c.precision.dtype == "f16" ? "fp16, which computes in f32" : "fp32"));
  // llm.c shards hold out nothing by themselves: asked-for validation without data.val would never run.
  if (seen.val_interval && t.val_interval > 0 && d.format == "llmc" && d.val.empty())
    fail("train.val_interval", num(t.val_interval) + " asks for validation, but data.val names no validation shards "
                               "(give data.val, or 0 for none)");
  if (seen.train_batch_size) at_least("train_batch_size", c.train_batch_size, 1);

  const SchedulerConfig& s = c.scheduler;
  if (s.type.empty()) return;
  const std::string p = "scheduler.params.";
  // Log warmup divides by log(warmup_num_steps), which is 0 for one step.
  if (s.warmup_type == "log" && s.warmup_num_steps == 1)
    fail(p + "warmup_num_steps", "must not be 1 with warmup_type \"log\" (use 0, >= 2 or \"linear\")");
  if (s.type == "WarmupLR") return;
  if (s.total_num_steps < s.warmup_num_steps)
    fail(p + "total_num_steps", show(s.total_num_steps) + " must be >= " + p + "warmup_num_steps " + show(s.warmup_num_steps));
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::string read_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  auto cannot_read = [&](int err) { return ConfigError("config: cannot read '" + path + "': " + std::strerror(err)); };
  if (!f) throw cannot_read(errno);
  // A config is a few KiB; a cap keeps /dev/zero or a mistaken data file from being read whole.
  constexpr size_t kMaxBytes = size_t{16} << 20;
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxBytes)
      throw ConfigError("config: '" + path + "' is larger than 16 MiB, which no config is (a config file is a few KiB)");
  }
  if (std::ferror(f.get())) throw cannot_read(errno);
  return text;
}

// nlohmann keeps the last of two equal keys without a word; this parse callback makes a repeated
// key an error rather than a silent override of the first. The schema has no arrays of objects, so
// array elements are left out of the path.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(std::string where) : where_(std::move(where)) {}  // "'PATH'" or a description

  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (opens_too_deep(depth, event)) throw ConfigError("config: " + where_ + ": " + kTooDeep);
    if (event == E::object_start || event == E::array_start) stack_.emplace_back();
    if (event == E::object_end || event == E::array_end) stack_.pop_back();
    if (event == E::key) {
      auto& [seen, current] = stack_.back();
      current = parsed.get<std::string>();
      if (!seen.insert(current).second) {
        std::string path;
        for (const auto& frame : stack_)
          if (!frame.second.empty()) path = join(path, frame.second);
        fail(path, "duplicate key");
      }
    }
    return true;
  }

 private:
  std::string where_;
  std::vector<std::pair<std::set<std::string>, std::string>> stack_;  // per open object: keys so far, current key
};

}  // namespace

void apply_override(json& j, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  std::vector<std::string> keys;
  if (eq != std::string::npos) {
    const std::string dotted = assignment.substr(0, eq);
    for (size_t start = 0;;) {
      const size_t dot = dotted.find('.', start);
      keys.push_back(dotted.substr(start, dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  if (keys.empty() || std::any_of(keys.begin(), keys.end(), [](const std::string& k) { return k.empty(); }))
    fail("--set '" + assignment + "'", "expected dotted.key=value");

  const std::string text = assignment.substr(eq + 1);
  const auto bounded = [&](int depth, json::parse_event_t event, json&) {
    if (opens_too_deep(depth, event)) fail("--set " + assignment.substr(0, eq), "the value's " + kTooDeep);
    return true;
  };
  json value = json::parse(text, bounded, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;  // so --set data.train=a.bin needs no JSON quotes

  if (j.is_null()) j = json::object();
  json* cur = &j;
  std::string path;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!cur->is_object())
      fail(path.empty() ? "top level" : path,
           "--set '" + assignment + "' needs an object here, found " + show(*cur));
    path = join(path, keys[i]);
    if (i + 1 == keys.size()) {
      (*cur)[keys[i]] = std::move(value);
    } else {
      if (!cur->contains(keys[i])) (*cur)[keys[i]] = json::object();
      cur = &(*cur)[keys[i]];
    }
  }
}

Config parse_config(const json& j, BatchSource batches) {
  Config c;
  const Reader r(j);
  if (!j.is_object()) fail("top level", "expected an object, got " + show(j));
  read_optimizer_and_scheduler_types(r, c);
  // Section by section, in the table's order, as a reader of the file would go; the top level's
  // own keys last.
  std::vector<std::string_view> sections;
  for (const KeySpec& k : config_table())
    if (const std::string_view s = section_of(k.key); !s.empty() && std::find(sections.begin(), sections.end(), s) == sections.end())
      sections.push_back(s);
  for (const std::string_view s : sections)
    if (const json* v = r.raw(s)) {
      check_keys(r, *v, std::string(s));
      read_rows(r, c, s);
    }
  check_keys(r, j, "", /*descend=*/false);
  read_rows(r, c, "");
  read_by_code(r, c);
  check_ranges(c);
  check_values(c, seen_in(r), batches);
  return c;
}

namespace {
// `text` as JSON; `where` names it in the message ("'PATH'", or "the inline configuration").
json parse_json_text(const std::string& text, const std::string& where) {
  try {
    return json::parse(text, DuplicateKeyCheck(where));
  } catch (const json::exception& e) {
    // A syntax error, or a number too large for a double (out_of_range 406, found by fuzzing).
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; the rest has line and column.
    std::string msg = e.what();
    if (const size_t close = msg.find("] "); msg.starts_with("[json.exception") && close != std::string::npos)
      msg.erase(0, close + 2);
    throw ConfigError("config: " + where + " is not valid JSON: " + msg);
  }
}
}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides, BatchSource batches) {
  json j = parse_json_text(read_file(path), "'" + path + "'");
  for (const auto& o : overrides) apply_override(j, o);
  return parse_config(j, batches);
}

Config load_config_text(const std::string& path_or_json, BatchSource batches) {
  const size_t first = path_or_json.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || path_or_json[first] != '{') return load_config(path_or_json, {}, batches);
  return parse_config(parse_json_text(path_or_json, "the inline configuration"), batches);
}

void check_batch_size(const Config& c, int world_size) {
  if (c.train_batch_size == 0) return;
  const long long product = 1LL * c.micro_batch * c.grad_accum * world_size;
  if (c.train_batch_size != product)
    fail("train_batch_size", std::to_string(c.train_batch_size) + " != train_micro_batch_size_per_gpu " +
                                 std::to_string(c.micro_batch) + " * gradient_accumulation_steps " +
                                 std::to_string(c.grad_accum) + " * world size " + std::to_string(world_size) +
                                 " = " + std::to_string(product));
}

}  // namespace zt
