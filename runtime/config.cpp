#include "runtime/config.hpp"

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

// DeepSpeed top-level keys that ztrain does not implement yet. A DeepSpeed config using one would
// train differently here, so each is an error rather than ignored. A key leaves this table in the
// same change that implements it.
constexpr std::string_view kDeepSpeedNotYet[] = {
    "amp",
    "wall_clock_breakdown", "memory_breakdown", "flops_profiler",
    "comms_logger", "monitor_config", "data_types",
    "communication_data_type", "prescale_gradients", "gradient_predivide_factor",
    "sparse_gradients", "sparse_attention", "elasticity", "pipeline", "compression_training",
    "autotuning", "data_efficiency", "curriculum_learning", "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer", "dump_state", "seq_parallel_communication_data_type",
    "load_universal_checkpoint", "use_node_local_storage", "nebula", "quantize_training",
    "eigenvalue", "progressive_layer_drop", "hybrid_engine", "weight_quantization", "timers",
    "compile", "dataloader_drop_last", "disable_allgather",
};

// DeepSpeed schedulers ztrain lacks, told apart from typos.
constexpr std::string_view kSchedulersNotYet[] = {"OneCycle", "LRRangeTest"};

constexpr int kMaxThreads = 1024;

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
std::string num(double v) {
  std::string s = show(v);
  return s.ends_with(".0") ? s.substr(0, s.size() - 2) : s;
}

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

// What a value must be to fill a field of the pointed-to type; nullptr when it is that. Integers
// must be integral JSON numbers (3.0 is not), while floats accept integers.
const char* expected(const json& v, const int*) { return v.is_number_integer() ? nullptr : "an integer"; }
const char* expected(const json& v, const uint64_t*) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0) ? nullptr : "a non-negative integer";
}
const char* expected(const json& v, const double*) { return v.is_number() ? nullptr : "a number"; }
const char* expected(const json& v, const bool*) { return v.is_boolean() ? nullptr : "true or false"; }
const char* expected(const json& v, const std::string*) { return v.is_string() ? nullptr : "a string"; }

// [Note: listing the keys] `ztrain config --list` runs the readers below over an empty file with a
// listing attached: every section then reads as present (and empty), and every key a reader asks
// for is recorded with its path, and where a getter reads it, its type and the default it leaves.
// The readers are the one declaration of the keys, so the list cannot drift from them.
thread_local std::vector<ConfigKey>* g_listing = nullptr;
// Sections that another name of the same section is read as, listed once under that name.
const std::set<std::string> kListedAliases = {"bfloat16"};

const char* type_name(const int*) { return "integer"; }
const char* type_name(const uint64_t*) { return "integer >= 0"; }
const char* type_name(const double*) { return "number"; }
const char* type_name(const bool*) { return "true|false"; }
const char* type_name(const std::string*) { return "string"; }

// One JSON object being read. Each getter records its key as known whether or not the file has
// it, so done() can reject everything else: a misspelt key is never silently ignored, and the
// known keys double as the candidates for "did you mean".
class Section {
 public:
  Section(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) fail(path_.empty() ? "top level" : path_, "expected an object, got " + show(j_));
  }

  std::string path(std::string_view key) const { return join(path_, key); }

  const json* find(std::string_view key) {
    known_.emplace_back(key);
    if (g_listing) g_listing->push_back({path(key), "value (see README.md)", ""});
    const auto it = j_.find(std::string(key));
    return it == j_.end() ? nullptr : &*it;
  }

  // Leaves dst alone and returns false when the key is absent.
  template <class T>
  bool get(std::string_view key, T& dst) {
    const json* v = find(key);
    if (g_listing) g_listing->back() = {path(key), type_name(&dst), show(json(dst))};
    if (!v) return false;
    if (const char* want = expected(*v, &dst)) fail(path(key), std::string("expected ") + want + ", got " + show(*v));
    if constexpr (std::is_same_v<T, int>) {
      if (v->is_number_unsigned() ? v->get<uint64_t>() > INT_MAX
                                  : v->get<int64_t>() < INT_MIN || v->get<int64_t>() > INT_MAX)
        fail(path(key), show(*v) + " does not fit in a 32-bit integer");
    }
    dst = v->get<T>();
    return true;
  }

  // A key ztrain refuses when given (a DeepSpeed option it does not implement): listed as such.
  const json* refused(std::string_view key) {
    const json* v = find(key);
    if (g_listing) g_listing->back().type = "refused (not implemented)";
    return v;
  }

  std::optional<Section> sub(std::string_view key) {
    const json* v = find(key);
    if (g_listing) g_listing->back().type = "section";
    static const json empty = json::object();
    if (!v && g_listing && !kListedAliases.count(path(key))) return Section(empty, path(key));  // [Note: listing the keys]
    if (!v) return std::nullopt;
    return Section(*v, path(key));
  }

  std::string known_list() const {
    std::string s;
    for (const auto& k : known_) s += (s.empty() ? "" : ", ") + k;
    return s;
  }

  // note is appended to the message, e.g. to say which keys this section takes.
  void done(const std::string& note = {}) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      const std::string& key = it.key();
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string best;
      size_t best_d = 3;
      for (const auto& k : known_) {
        const size_t d = edit_distance(key, k);
        // 2*d <= size keeps "x" from suggesting "lr".
        if (d < best_d && 2 * d <= key.size()) best = k, best_d = d;
      }
      fail(path(key), "unknown key" + (best.empty() ? "" : " (did you mean '" + best + "'?)") + note);
    }
  }

 private:
  const json& j_;
  std::string path_;
  std::vector<std::string> known_;
};

// What the file gave explicitly, where the struct's default cannot tell.
struct Seen {
  bool data_train = false, val_fraction = false, train_batch_size = false, total_num_steps = false;
  bool chat_keys = false;
  bool precision = false;  // a bf16 (bfloat16) or fp16 section was given
  bool val_interval = false;
};


void read_model(Section& top, ModelConfig& m) {
  auto s = top.sub("model");
  if (!s) return;
  s->get("arch", m.arch);
  s->get("wte_units", m.wte_units);
  // Hugging Face's nested rope_scaling object holds the "rope_scaling.<key>" fields.
  std::optional<Section> rope = s->sub("rope_scaling");
  for_each_dim(
      [&](const char* key, auto& v) {
        constexpr std::string_view prefix = "rope_scaling.";
        const std::string_view k = key;
        const bool got = k.starts_with(prefix) ? rope && rope->get(k.substr(prefix.size()), v) : s->get(k, v);
        if (got) m.given.emplace_back(key);
      },
      m.dims);
  if (rope) rope->done();
  if (const json* v = s->find("init_from"); v && !v->is_null()) {
    if (!v->is_string()) fail(s->path("init_from"), "expected a string or null, got " + show(*v));
    if (v->get_ref<const std::string&>().empty()) fail(s->path("init_from"), "must be a path or null, got \"\"");
    m.init_from = v->get<std::string>();
  }
  s->done();
}

void read_data(Section& top, DataConfig& d, Seen& seen) {
  auto s = top.sub("data");
  if (!s) return;
  s->get("format", d.format);
  seen.data_train = s->get("train", d.train);
  s->get("val", d.val);
  s->get("seq_len", d.seq_len);
  s->get("shuffle", d.shuffle);
  seen.val_fraction = s->get("val_fraction", d.val_fraction);
  seen.chat_keys |= s->get("tokenizer", d.tokenizer);
  seen.chat_keys |= s->get("chat_template", d.chat_template);
  seen.chat_keys |= s->get("packing", d.packing);
  seen.chat_keys |= s->get("system", d.system);
  s->done();
}

void read_train(Section& top, TrainConfig& t, Seen& seen) {
  auto s = top.sub("train");
  if (!s) return;
  s->get("steps", t.steps);
  s->get("seed", t.seed);
  s->get("threads", t.threads);
  seen.val_interval = s->get("val_interval", t.val_interval);
  s->get("val_batches", t.val_batches);
  s->get("save_model", t.save_model);
  s->get("metrics", t.metrics);
  s->get("trace", t.trace);
  s->get("comm_timeout_s", t.comm_timeout_s);
  s->get("comm_progress", t.comm_progress);
  s->get("device", t.device);
  s->get("attention", t.attention);
  s->get("skip_nonfinite_steps", t.skip_nonfinite_steps);
  // A folder, or true: the checkpoint root (checkpoint.dir), resolved in check_values.
  if (const json* v = s->find("resume"); v && v->is_boolean()) {
    if (v->get<bool>()) t.resume = "true";
  } else {
    s->get("resume", t.resume);
  }
  s->done();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

void read_optimizer(Section& top, OptimizerConfig& o) {
  auto s = top.sub("optimizer");
  if (!s) return;
  std::string type = o.type;
  s->get("type", type);
  // DeepSpeed's "Adam" defaults to adam_w_mode true, i.e. decoupled weight decay: that is AdamW.
  const bool adam = lower(type) == "adam";
  if (lower(type) != "adamw" && !adam)
    fail(s->path("type"), show(type) + " is not implemented yet (ztrain has \"AdamW\")");
  o.type = "AdamW";
  auto p = s->sub("params");
  s->done();
  if (!p) return;
  p->get("lr", o.lr);
  if (const json* v = p->find("betas")) {
    if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number() || !(*v)[1].is_number())
      fail(p->path("betas"), "expected an array of 2 numbers, got " + show(*v));
    for (size_t i = 0; i < 2; ++i) {
      const double b = (*v)[i].get<double>();
      if (!(b >= 0.0 && b < 1.0))
        fail(p->path("betas") + "[" + std::to_string(i) + "]", "must be in [0, 1), got " + num(b));
    }
    o.beta1 = (*v)[0].get<double>();
    o.beta2 = (*v)[1].get<double>();
  }
  p->get("eps", o.eps);
  p->get("weight_decay", o.weight_decay);
  bool adam_w_mode = true;
  if (adam && p->get("adam_w_mode", adam_w_mode) && !adam_w_mode)
    fail(p->path("adam_w_mode"), "false (Adam with L2 weight decay) is not implemented yet");
  p->done();
}

void read_scheduler(Section& top, SchedulerConfig& c, Seen& seen) {
  auto s = top.sub("scheduler");
  if (!s) return;
  // [Note: listing the keys]: every scheduler's params are listed, its type given or not.
  const bool listing = g_listing != nullptr;
  if (!s->get("type", c.type) && !listing) fail(s->path("type"), "required key missing");
  for (std::string_view t : kSchedulersNotYet)
    if (c.type == t) fail(s->path("type"), show(c.type) + " is a DeepSpeed scheduler that ztrain does not implement yet");
  const bool warmup = listing || c.type == "WarmupLR", decay = listing || c.type == "WarmupDecayLR",
             cosine = listing || c.type == "WarmupCosineLR";
  if (!warmup && !decay && !cosine)
    fail(s->path("type"), "unknown scheduler " + show(c.type) + " (expected WarmupLR, WarmupDecayLR or WarmupCosineLR)");
  auto p = s->sub("params");
  s->done();
  if (!p) return;
  // Each scheduler takes only its own DeepSpeed params; the rest fall through to done() below.
  if (!cosine || listing) {
    p->get("warmup_min_lr", c.warmup_min_lr);
    p->get("warmup_max_lr", c.warmup_max_lr);
  }
  p->get("warmup_num_steps", c.warmup_num_steps);
  p->get("warmup_type", c.warmup_type);
  if (!warmup || listing) seen.total_num_steps = p->get("total_num_steps", c.total_num_steps);
  if (cosine) {
    p->get("warmup_min_ratio", c.warmup_min_ratio);
    p->get("cos_min_ratio", c.cos_min_ratio);
  }
  p->done(" for " + c.type + ", which takes: " + p->known_list());
}

// DeepSpeed's zero_optimization keys that ztrain does not implement yet.
constexpr std::string_view kZeroNotYet[] = {
    "round_robin_gradients", "elastic_checkpoint", "zero_quantized_weights",
    "zero_quantized_gradients", "zero_quantized_nontrainable_weights", "mics_hierarchical_params_gather", "cpu_offload", "cpu_offload_params", "cpu_offload_use_pin_memory",
    "memory_efficient_linear", "use_all_reduce_for_fetch_params", "stage3_model_persistence_threshold",
    "module_granularity_threshold", "pipeline_loading_checkpoint", "override_module_apply", "legacy_stage1",
    "zeropp_loco_param", "log_trace_cache_warnings", "load_from_fp32_weights",
};

// FSDP's sharding strategies and the stage each one is.
constexpr std::pair<std::string_view, int> kShardingStrategies[] = {
    {"NO_SHARD", 0}, {"SHARD_GRAD_OP", 2}, {"FULL_SHARD", 3}, {"HYBRID_SHARD", 3}, {"_HYBRID_SHARD_ZERO2", 2}};

// An element count: DeepSpeed configs write sizes as 5e8, so an integral float is one too.
void get_count(Section& s, std::string_view key, int64_t& dst) {
  const json* v = s.find(key);
  if (g_listing) g_listing->back() = {s.path(key), "count (5e8 too)", show(json(dst))};
  if (!v) return;
  const double d = v->is_number() ? v->get<double>() : -1.0;
  if (!v->is_number() || d < 0 || d != std::floor(d) || d > 9.0e18)
    fail(s.path(key), "expected a non-negative whole number of elements, got " + show(*v));
  dst = v->is_number_integer() ? v->get<int64_t>() : static_cast<int64_t>(d);
}

template <class T>
void at_least(const std::string& path, T v, T min) {
  if (v < min) fail(path, "must be >= " + num(min) + ", got " + num(v));
}

void positive(const std::string& path, double v) {
  if (!(v > 0.0)) fail(path, "must be > 0, got " + num(v));
}

void in_unit_interval(const std::string& path, double v) {
  if (!(v >= 0.0 && v <= 1.0)) fail(path, "must be in [0, 1], got " + num(v));
}

// offload_optimizer (param false) or offload_param. DeepSpeed's keys with DeepSpeed's defaults;
// ratio and fast_init change nothing here at their defaults and are refused otherwise.
void read_offload(Section& zero, std::string_view key, OffloadConfig& o, bool param) {
  auto s = zero.sub(key);
  if (!s) return;
  if (param) o.buffer_count = 5;
  if (s->get("device", o.device) && o.device != "none" && o.device != "cpu" && o.device != "nvme")
    fail(s->path("device"), "expected \"none\", \"cpu\" or \"nvme\", got " + show(o.device));
  if (const json* v = s->find("nvme_path"); v && !v->is_null()) s->get("nvme_path", o.nvme_path);
  s->get("pin_memory", o.pin_memory);
  s->get("buffer_count", o.buffer_count);
  if (param) {
    get_count(*s, "buffer_size", o.buffer_size);
    get_count(*s, "max_in_cpu", o.max_in_cpu);
  } else {
    bool both = false;  // DeepSpeed's older key for both
    if (s->get("pipeline", both)) o.pipeline_read = o.pipeline_write = both;
    s->get("pipeline_read", o.pipeline_read);
    s->get("pipeline_write", o.pipeline_write);
    s->get("overlap_step", o.overlap_step);
    bool fast_init = false;
    s->get("fast_init", fast_init);
    double ratio = 1.0;
    if (s->get("ratio", ratio) && ratio != 1.0)
      fail(s->path("ratio"), "a partial offload (ratio < 1) is not implemented yet; use 1");
  }
  s->done(", which " + std::string(key) + " does not take (it takes: " + s->known_list() + ")");
  at_least(s->path("buffer_count"), o.buffer_count, 1);
  if (o.device == "nvme" && o.nvme_path.empty()) fail(s->path("nvme_path"), "required with device \"nvme\"");
  if (param && o.buffer_size == 0) fail(s->path("buffer_size"), "must be > 0");
}

void read_zero(Section& top, ZeroConfig& z) {
  auto s = top.sub("zero_optimization");
  if (!s) return;
  for (std::string_view k : kZeroNotYet)
    if (s->refused(k)) fail(s->path(k), "is a DeepSpeed ZeRO key that ztrain does not implement yet");
  const bool has_stage = s->get("stage", z.stage);
  if (has_stage && (z.stage < 0 || z.stage > 3)) fail(s->path("stage"), "must be 0, 1, 2 or 3, got " + num(z.stage));
  std::string strategy;
  if (s->get("sharding_strategy", strategy)) {
    const auto* it = std::find_if(std::begin(kShardingStrategies), std::end(kShardingStrategies),
                                  [&](const auto& e) { return e.first == strategy; });
    if (it == std::end(kShardingStrategies))
      fail(s->path("sharding_strategy"), "expected \"NO_SHARD\", \"SHARD_GRAD_OP\", \"FULL_SHARD\", \"HYBRID_SHARD\" or "
                                         "\"_HYBRID_SHARD_ZERO2\", got " + show(strategy));
    if (has_stage && it->second != z.stage)
      fail(s->path("sharding_strategy"), show(strategy) + " is stage " + std::to_string(it->second) +
                                             ", but zero_optimization.stage is " + std::to_string(z.stage));
    z.stage = it->second;
    z.hybrid = strategy.find("HYBRID") != std::string::npos;
  }
  // [Note: shard groups]: the group size, FSDP's way (shard_group_size with a hybrid strategy,
  // ztrain's key for the device mesh's shard dimension) or DeepSpeed's (mics_shard_size, -1 off).
  const bool has_group = s->get("shard_group_size", z.shard_group_size);
  int mics = -1;
  if (s->get("mics_shard_size", mics) && mics != -1) {
    if (mics < 1) fail(s->path("mics_shard_size"), "must be >= 1 (or -1: off), got " + num(mics));
    if (has_stage && z.stage != 3) fail(s->path("mics_shard_size"), "needs zero_optimization.stage 3, got stage " + num(z.stage));
    if (!strategy.empty() && strategy != "HYBRID_SHARD")
      fail(s->path("mics_shard_size"), "is hybrid sharding at stage 3, but sharding_strategy is " + show(strategy));
    if (has_group && z.shard_group_size != mics)
      fail(s->path("mics_shard_size"), num(mics) + " and shard_group_size " + num(z.shard_group_size) + " disagree");
    z.stage = 3, z.hybrid = true, z.shard_group_size = mics;
  }
  if (has_group && !z.hybrid)
    fail(s->path("shard_group_size"), "applies to sharding_strategy \"HYBRID_SHARD\" or \"_HYBRID_SHARD_ZERO2\" (or mics_shard_size) only");
  if (has_group && z.shard_group_size < 1) fail(s->path("shard_group_size"), "must be >= 1, got " + num(z.shard_group_size));
  if (s->get("zero_hpz_partition_size", z.hpz_partition_size)) {
    if (z.hpz_partition_size < 1) fail(s->path("zero_hpz_partition_size"), "must be >= 1, got " + num(z.hpz_partition_size));
    if (z.hpz_partition_size > 1 && z.stage != 3)
      fail(s->path("zero_hpz_partition_size"), "needs zero_optimization.stage 3, got stage " + num(z.stage));
    if (z.hpz_partition_size > 1 && z.hybrid)
      fail(s->path("zero_hpz_partition_size"), "with hybrid sharding: the shard group already keeps every gather within it");
  }
  s->get("overlap_comm", z.overlap_comm);
  s->get("reduce_scatter", z.reduce_scatter);
  s->get("contiguous_gradients", z.contiguous_gradients);
  bool partitions = true;
  if (s->get("allgather_partitions", partitions) && !partitions)
    fail(s->path("allgather_partitions"), "false (a broadcast per partition) is not implemented yet");
  bool ignore_unused = true;  // every GPT-2 parameter is used, so there is nothing to ignore
  s->get("ignore_unused_parameters", ignore_unused);
  get_count(*s, "reduce_bucket_size", z.reduce_bucket_size);
  get_count(*s, "allgather_bucket_size", z.allgather_bucket_size);
  get_count(*s, "stage3_prefetch_bucket_size", z.prefetch_bucket_size);
  get_count(*s, "stage3_max_live_parameters", z.max_live_parameters);
  get_count(*s, "stage3_max_reuse_distance", z.max_reuse_distance);
  get_count(*s, "stage3_param_persistence_threshold", z.param_persistence_threshold);
  get_count(*s, "sub_group_size", z.sub_group_size);
  s->get("stage3_gather_fp16_weights_on_model_save", z.gather_16bit_on_save);  // DeepSpeed's older name
  s->get("stage3_gather_16bit_weights_on_model_save", z.gather_16bit_on_save);
  read_offload(*s, "offload_optimizer", z.offload_optimizer, false);
  read_offload(*s, "offload_param", z.offload_param, true);
  if (s->get("frozen_params", z.frozen_params) && z.frozen_params != "sharded" && z.frozen_params != "replicated")
    fail(s->path("frozen_params"), "expected \"sharded\" or \"replicated\", got " + show(z.frozen_params));
  s->done();
  if (z.sub_group_size == 0) fail(s->path("sub_group_size"), "must be > 0");
  if (z.offload_optimizer.enabled() && z.stage == 0)
    fail(s->path("offload_optimizer.device"), "needs zero_optimization.stage 1, 2 or 3 (stage 0 has no shard to offload)");
  if (z.offload_param.enabled() && z.stage != 3)
    fail(s->path("offload_param.device"), "needs zero_optimization.stage 3, got stage " + std::to_string(z.stage));
  if (z.offload_param.enabled() && z.hpz_partition_size > 1)
    fail(s->path("zero_hpz_partition_size"), "with offload_param is not implemented yet (the secondary shard would stay on the device)");
  if (z.reduce_bucket_size == 0) fail(s->path("reduce_bucket_size"), "must be > 0");
  if (z.allgather_bucket_size == 0) fail(s->path("allgather_bucket_size"), "must be > 0");
}

// PEFT's LoraConfig under our names (PEFT's own lora_alpha and lora_dropout taken too).
void read_lora(Section& top, LoraConfig& l) {
  auto s = top.sub("lora");
  if (!s) return;
  s->get("r", l.r);
  s->get("alpha", l.alpha);
  s->get("lora_alpha", l.alpha);
  s->get("dropout", l.dropout);
  s->get("lora_dropout", l.dropout);
  s->get("init", l.init);
  s->get("use_rslora", l.use_rslora);
  if (s->get("init_from", l.init_from) && l.init_from.empty()) fail(s->path("init_from"), "must be a PEFT adapter folder, got \"\"");
  if (const json* v = s->find("target_modules")) {
    if (v->is_string()) {
      l.target_modules = {v->get<std::string>()};  // "all-linear", or one name
    } else {
      if (!v->is_array() || v->empty()) fail(s->path("target_modules"), "expected a list of module names, got " + show(*v));
      for (const json& e : *v) {
        if (!e.is_string() || e.get_ref<const std::string&>().empty())
          fail(s->path("target_modules"), "expected module names (strings), got " + show(e));
        l.target_modules.push_back(e.get<std::string>());
      }
    }
  }
  s->done();
  if (l.r < 0) fail(s->path("r"), "must be at least 1 (or 0: no LoRA), got " + num(l.r));
  if (l.r == 0 && !l.init_from.empty()) fail(s->path("init_from"), "starts adapters, and lora.r is 0 (no LoRA)");
  if (!(l.alpha > 0)) fail(s->path("alpha"), "must be positive, got " + num(l.alpha));
  if (!(l.dropout >= 0 && l.dropout < 1)) fail(s->path("dropout"), "must be in [0, 1), got " + num(l.dropout));
  if (l.init != "default" && l.init != "gaussian")
    fail(s->path("init"), "expected \"default\" (PEFT's init_lora_weights true) or \"gaussian\", got " + show(l.init));
}

// DeepSpeed's activation_checkpointing section, which turns checkpointing on (DeepSpeed's model
// code calls its checkpoint(); here the section is that call), with torchtitan's mode keys:
// mode "full" (the default), "selective" with selective_ac_option "op" or a block frequency k,
// or "none". DeepSpeed's other keys change nothing here and are taken as such.
void read_activation_checkpointing(Section& top, ActivationCheckpointing& a) {
  auto s = top.sub("activation_checkpointing");
  if (!s) return;
  using Mode = ActivationCheckpointing::Mode;
  std::string mode = "full";
  s->get("mode", mode);
  if (mode != "full" && mode != "selective" && mode != "none")
    fail(s->path("mode"), "expected \"full\", \"selective\" or \"none\", got " + show(mode));
  std::string option = "2";  // torchtitan's default
  if (const json* v = s->find("selective_ac_option")) {
    if (mode != "selective") fail(s->path("selective_ac_option"), "applies to mode \"selective\", and mode is " + show(mode));
    if (v->is_number_integer()) option = std::to_string(v->get<int64_t>());
    else if (v->is_string()) option = v->get<std::string>();
    else fail(s->path("selective_ac_option"), "expected \"op\" or a block frequency k >= 1, got " + show(*v));
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
      fail(s->path("selective_ac_option"), "expected \"op\" or a block frequency k >= 1, got " + show(option));
    a.every = static_cast<int>(k);
  }
  s->get("cpu_checkpointing", a.cpu_checkpointing);
  // Without tensor parallelism a rank holds all of its micro-batch's checkpoints, so partitioning
  // them is DeepSpeed's no-op at mp_size 1; the rest only shape DeepSpeed's own buffers.
  bool ignored = false;
  int count = 0;
  for (const char* k : {"partition_activations", "contiguous_memory_optimization", "synchronize_checkpoint_boundary", "profile"})
    s->get(k, ignored);
  s->get("number_checkpoints", count);
  s->done();
  if (a.cpu_checkpointing && a.mode == Mode::none)
    fail(s->path("cpu_checkpointing"), "moves checkpoints to host memory, and mode is \"none\"");
}

// bf16 / bfloat16 (DeepSpeed takes either name) and fp16; each {"enabled": bool, ...}.
// ztrain's checkpoint section. DeepSpeed's keys of the same section are refused by name.
void read_checkpoint(Section& top, CheckpointConfig& c) {
  auto s = top.sub("checkpoint");
  if (!s) return;
  for (const char* k : {"tag_validation", "load_universal", "use_node_local_storage", "parallel_write"})
    if (s->refused(k)) fail(s->path(k), "is a DeepSpeed checkpoint key that ztrain does not implement");
  s->get("dir", c.dir);
  s->get("save_interval", c.save_interval);
  s->get("keep_last", c.keep_last);
  s->get("overwrite", c.overwrite);
  s->done();
  at_least(s->path("save_interval"), c.save_interval, 0);
  at_least(s->path("keep_last"), c.keep_last, 0);
  if (c.save_interval > 0 && c.dir.empty()) fail(s->path("dir"), "required with checkpoint.save_interval");
}

// DeepSpeed's aio section. thread_count is the old name of intra_op_parallelism.
void read_aio(Section& top, AioConfig& a) {
  auto s = top.sub("aio");
  if (!s) return;
  get_count(*s, "block_size", a.block_size);
  s->get("queue_depth", a.queue_depth);
  if (s->get("thread_count", a.intra_op_parallelism))
    std::fprintf(stderr, "ztrain: warning: config: aio.thread_count is deprecated; use aio.intra_op_parallelism\n");
  s->get("intra_op_parallelism", a.intra_op_parallelism);
  s->get("single_submit", a.single_submit);
  s->get("overlap_events", a.overlap_events);
  if (const json* v = s->refused("use_gds"); v && *v != json(false))
    fail(s->path("use_gds"), "GPUDirect Storage is not implemented");
  s->done();
  if (a.block_size <= 0 || a.block_size % 4096 != 0)
    fail(s->path("block_size"), "must be a positive multiple of 4096 (O_DIRECT), got " + num(static_cast<double>(a.block_size)));
  at_least(s->path("queue_depth"), a.queue_depth, 1);
  at_least(s->path("intra_op_parallelism"), a.intra_op_parallelism, 1);
}

// DeepSpeed's tensorboard and csv_monitor sections, its keys and defaults.
void read_monitor(Section& top, const char* key, MonitorConfig& m) {
  auto s = top.sub(key);
  if (!s) return;
  s->get("enabled", m.enabled);
  s->get("output_path", m.output_path);
  s->get("job_name", m.job_name);
  s->done();
  if (m.enabled && m.output_path.empty() && m.job_name.empty())
    fail(s->path("job_name"), "and output_path are both empty: name the folder the files go to");
}

// DeepSpeed's monitors that send to a network service: refused when enabled (a section with
// enabled false, as DeepSpeed configs often carry, is accepted and not read further).
void read_service_monitor(Section& top, const char* key, const char* service) {
  const json* v = top.find(key);
  if (g_listing) g_listing->back().type = "refused when enabled";
  if (!v) return;
  if (!v->is_object()) fail(key, "expected an object, got " + show(*v));
  const auto enabled = v->find("enabled");
  if (enabled != v->end() && *enabled != json(false))
    fail(std::string(key) + ".enabled", std::string("is DeepSpeed's ") + service +
                                            " monitor, which sends to a network service; ztrain writes the same "
                                            "scalars to files: the tensorboard and csv_monitor sections, and train.metrics");
}

void read_precision(Section& top, PrecisionConfig& p, Seen& seen) {
  seen.precision = top.find("bf16") || top.find("bfloat16") || top.find("fp16");
  bool bf16 = false, fp16 = false;
  std::string bf16_key;
  for (const char* key : {"bf16", "bfloat16"}) {
    auto s = top.sub(key);
    if (!s) continue;
    if (!bf16_key.empty()) fail(key, "given together with " + bf16_key + " (DeepSpeed takes either name, not both)");
    bf16_key = key;
    s->get("enabled", bf16);
    bool immediate = false;  // DeepSpeed's immediate_grad_update changes nothing here: grads are always reduced per unit
    s->get("immediate_grad_update", immediate);
    s->done();
  }
  if (auto s = top.sub("fp16")) {
    s->get("enabled", fp16);
    s->get("loss_scale", p.loss_scale);
    s->get("initial_scale_power", p.initial_scale_power);
    s->get("loss_scale_window", p.loss_scale_window);
    s->get("hysteresis", p.hysteresis);
    s->get("consecutive_hysteresis", p.consecutive_hysteresis);
    s->get("min_loss_scale", p.min_loss_scale);
    for (const char* k : {"auto_cast", "fp16_master_weights_and_grads"})
      if (const json* v = s->refused(k); v && *v != json(false))
        fail(s->path(k), "is a DeepSpeed fp16 option that ztrain does not implement yet");
    s->done();
    if (fp16) {
      at_least(s->path("loss_scale"), p.loss_scale, 0.0);
      if (p.initial_scale_power < 0 || p.initial_scale_power > 64)
        fail(s->path("initial_scale_power"), "must be in [0, 64], got " + num(p.initial_scale_power));
      at_least(s->path("loss_scale_window"), p.loss_scale_window, 1);
      at_least(s->path("hysteresis"), p.hysteresis, 1);
      positive(s->path("min_loss_scale"), p.min_loss_scale);
    }
  }
  if (bf16 && fp16) fail("fp16.enabled", "and " + bf16_key + ".enabled are both true; choose one");
  p.dtype = bf16 ? "bf16" : fp16 ? "f16" : "f32";
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
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, int>) at_least(path, v, gpt2_dim ? 1 : 0);
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
  if (d.format != "llmc" && d.format != "bytes" && d.format != "chat")
    fail("data.format", "expected \"llmc\", \"bytes\" or \"chat\", got " + show(d.format));
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
  at_least("data.seq_len", d.seq_len, 1);
  if (known("max_seq_len") && d.seq_len > m.dims.max_seq_len)
    fail("data.seq_len", show(d.seq_len) + " must be <= model.max_seq_len " + show(m.dims.max_seq_len));
  if (!(d.val_fraction > 0.0 && d.val_fraction <= 0.5))
    fail("data.val_fraction", "must be in (0, 0.5], got " + num(d.val_fraction));
  if (seen.val_fraction && d.format != "bytes" && d.format != "chat")
    fail("data.val_fraction", "only applies to data.format \"bytes\" and \"chat\"");
  if (seen.val_fraction && !d.val.empty()) fail("data.val_fraction", "has no effect when data.val is set");

  const TrainConfig& t = c.train;
  at_least("train.steps", t.steps, 1);
  at_least("train.threads", t.threads, 0);
  // libgomp cannot start teams of tens of thousands (a crash at 100,000); no host has that many cores.
  if (t.threads > kMaxThreads) fail("train.threads", "must be <= " + num(kMaxThreads) + ", got " + num(t.threads));
  at_least("train.comm_timeout_s", t.comm_timeout_s, 0.0);
  // The timeout becomes a count of milliseconds; 1e7 s (four months) is far beyond any real wait.
  if (t.comm_timeout_s > 1e7)
    fail("train.comm_timeout_s", "must be <= 1e7 seconds (0 waits forever), got " + num(t.comm_timeout_s));
  at_least("train.skip_nonfinite_steps", t.skip_nonfinite_steps, 0);
  if (t.comm_progress != "auto" && t.comm_progress != "thread" && t.comm_progress != "poll")
    fail("train.comm_progress", "expected \"auto\", \"thread\" or \"poll\", got " + show(t.comm_progress));
  if (t.device != "cpu" && t.device != "cuda")
    fail("train.device", "expected \"cpu\" or \"cuda\", got " + show(t.device));
  if (t.device == "cuda" && !seen.precision) c.precision.dtype = "bf16";
  if (t.attention != "ztrain" && t.attention != "cudnn")
    fail("train.attention", "expected \"ztrain\" or \"cudnn\", got " + show(t.attention));
  if (t.attention == "cudnn" && t.device != "cuda")
    fail("train.attention", "\"cudnn\" (cuDNN's fused attention) runs on cuda only; train.device is " + show(t.device));
  if (t.attention == "cudnn" && c.precision.dtype != "bf16")
    fail("train.attention", std::string("\"cudnn\" computes in bf16 only: it needs bf16.enabled (the default on cuda), "
                                        "not ") + (c.precision.dtype == "f16" ? "fp16, which computes in f32" : "fp32"));
  at_least("train.val_interval", t.val_interval, 0);
  // llm.c shards hold out nothing by themselves: asked-for validation without data.val would never run.
  if (seen.val_interval && t.val_interval > 0 && d.format == "llmc" && d.val.empty())
    fail("train.val_interval", num(t.val_interval) + " asks for validation, but data.val names no validation shards "
                               "(give data.val, or 0 for none)");
  if (t.val_interval > 0) at_least("train.val_batches", t.val_batches, 1);

  at_least("train_micro_batch_size_per_gpu", c.micro_batch, 1);
  at_least("gradient_accumulation_steps", c.grad_accum, 1);
  if (seen.train_batch_size) at_least("train_batch_size", c.train_batch_size, 1);
  at_least("gradient_clipping", c.gradient_clipping, 0.0);
  at_least("steps_per_print", c.steps_per_print, 1);

  positive("optimizer.params.lr", c.optimizer.lr);
  positive("optimizer.params.eps", c.optimizer.eps);
  at_least("optimizer.params.weight_decay", c.optimizer.weight_decay, 0.0);

  const SchedulerConfig& s = c.scheduler;
  if (s.type.empty()) return;
  const std::string p = "scheduler.params.";
  at_least(p + "warmup_min_lr", s.warmup_min_lr, 0.0);
  positive(p + "warmup_max_lr", s.warmup_max_lr);
  at_least(p + "warmup_num_steps", s.warmup_num_steps, 0);
  if (s.warmup_type != "log" && s.warmup_type != "linear")
    fail(p + "warmup_type", "expected \"log\" or \"linear\", got " + show(s.warmup_type));
  // Log warmup divides by log(warmup_num_steps), which is 0 for one step.
  if (s.warmup_type == "log" && s.warmup_num_steps == 1)
    fail(p + "warmup_num_steps", "must not be 1 with warmup_type \"log\" (use 0, >= 2 or \"linear\")");
  in_unit_interval(p + "warmup_min_ratio", s.warmup_min_ratio);
  in_unit_interval(p + "cos_min_ratio", s.cos_min_ratio);
  if (s.type == "WarmupLR") return;
  if (!seen.total_num_steps) fail(p + "total_num_steps", "required key missing (" + s.type + " needs it)");
  positive(p + "total_num_steps", s.total_num_steps);
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

namespace {
// Every section and key of a config, read into c: parse_config's reading, and the listing's.
void read_sections(Section& top, Config& c, Seen& seen) {
  read_model(top, c.model);
  read_data(top, c.data, seen);
  read_train(top, c.train, seen);
  read_optimizer(top, c.optimizer);
  read_scheduler(top, c.scheduler, seen);
  read_zero(top, c.zero);
  read_lora(top, c.lora);
  read_activation_checkpointing(top, c.activation_checkpointing);
  read_precision(top, c.precision, seen);
  read_aio(top, c.aio);
  read_checkpoint(top, c.checkpoint);
  read_monitor(top, "tensorboard", c.tensorboard);
  read_monitor(top, "csv_monitor", c.csv_monitor);
  read_service_monitor(top, "wandb", "Weights & Biases");
  read_service_monitor(top, "comet", "Comet");
  seen.train_batch_size = top.get("train_batch_size", c.train_batch_size);
  top.get("train_micro_batch_size_per_gpu", c.micro_batch);
  top.get("gradient_accumulation_steps", c.grad_accum);
  top.get("gradient_clipping", c.gradient_clipping);
  top.get("steps_per_print", c.steps_per_print);
}
}  // namespace

Config parse_config(const json& j, BatchSource batches) {
  Config c;
  Seen seen;
  Section top(j, "");
  for (auto it = j.begin(); it != j.end(); ++it)
    for (std::string_view k : kDeepSpeedNotYet)
      if (it.key() == k) fail(it.key(), "is a DeepSpeed key that ztrain does not implement yet");
  read_sections(top, c, seen);
  top.done();
  check_values(c, seen, batches);
  return c;
}

std::vector<ConfigKey> config_keys() {
  std::vector<ConfigKey> keys;
  g_listing = &keys;
  try {
    const json empty = json::object();
    Section top(empty, "");
    Config c;
    Seen seen;
    read_sections(top, c, seen);
  } catch (...) {
    g_listing = nullptr;
    throw;
  }
  g_listing = nullptr;
  // A key read twice (found, then got) is listed once, with what the getter knew.
  std::vector<ConfigKey> out;
  for (ConfigKey& k : keys) {
    auto it = std::find_if(out.begin(), out.end(), [&](const ConfigKey& o) { return o.path == k.path; });
    if (it == out.end()) out.push_back(std::move(k));
    else if (k.type != "value (see README.md)") *it = std::move(k);
  }
  return out;
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
