#include "runtime/config.hpp"
#include "runtime/config_keys.hpp"
#include "tests/config_examples.hpp"
#include "runtime/zero/groups.hpp"
#include "tests/test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

using nlohmann::json;
using zt::Config;
using zt::ConfigError;

namespace {

// The smallest valid config: data.train is the only required key.
json minimal() { return json{{"data", {{"train", "shards/*_train_*.bin"}}}}; }

// minimal() with --set style edits, so each test shows only what it breaks.
json with(const std::vector<std::string>& sets) {
  json j = minimal();
  for (const auto& s : sets) zt::apply_override(j, s);
  return j;
}

// The ConfigError message parse_config gives, or "(no error)".
std::string error_of(const json& j) {
  try {
    zt::parse_config(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string error_of(std::initializer_list<std::string> sets) { return error_of(with(sets)); }

const char* kExample = R"({
  "model": {"arch": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257,
            "padded_vocab_size": 50304, "max_seq_len": 1024, "init_from": null},
  "data":  {"format": "llmc", "train": "shards/*_train_*.bin", "val": "shards/*_val_*.bin",
            "seq_len": 256, "shuffle": false},
  "train": {"steps": 1000, "seed": 1337, "threads": 2, "val_interval": 100, "val_batches": 10},
  "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8,
                "weight_decay": 0.1}},
  "gradient_clipping": 1.0, "steps_per_print": 10
})";

using zt::test::TempDir;

}  // namespace

TEST_CASE("the example config parses into the right values") {
  const Config c = zt::parse_config(json::parse(kExample));
  CHECK(c.model.arch == "gpt2");
  CHECK(c.model.dims.n_layer == 12);
  CHECK(c.model.dims.n_head == 12);
  CHECK(c.model.dims.n_embd == 768);
  CHECK(c.model.dims.vocab_size == 50257);
  CHECK(c.model.dims.padded_vocab_size == 50304);
  CHECK(c.model.dims.max_seq_len == 1024);
  CHECK_FALSE(c.model.init_from.has_value());
  CHECK(c.model.given == std::vector<std::string>{"n_layer", "n_head", "n_embd", "vocab_size",
                                                  "padded_vocab_size", "max_seq_len"});
  CHECK(c.data.format == "llmc");
  CHECK(c.data.train == "shards/*_train_*.bin");
  CHECK(c.data.val == "shards/*_val_*.bin");
  CHECK(c.data.seq_len == 256);
  CHECK_FALSE(c.data.shuffle);
  CHECK(c.train.steps == 1000);
  CHECK(c.train.seed == 1337);
  CHECK(c.train.threads == 2);
  CHECK(c.train.val_interval == 100);
  CHECK(c.train.val_batches == 10);
  CHECK(c.micro_batch == 4);
  CHECK(c.grad_accum == 1);
  CHECK(c.train_batch_size == 0);
  CHECK(c.optimizer.type == "AdamW");
  CHECK(c.optimizer.lr == 3e-4);
  CHECK(c.optimizer.beta1 == 0.9);
  CHECK(c.optimizer.beta2 == 0.95);
  CHECK(c.optimizer.eps == 1e-8);
  CHECK(c.optimizer.weight_decay == 0.1);
  CHECK(c.gradient_clipping == 1.0);
  CHECK(c.steps_per_print == 10);
  CHECK(c.scheduler.type.empty());
}

TEST_CASE("defaults: only data.train given") {
  const Config c = zt::parse_config(minimal());
  const Config d;  // the header's defaults
  CHECK(c.model.arch == d.model.arch);
  CHECK(c.model.dims.n_layer == d.model.dims.n_layer);
  CHECK(c.model.dims.n_embd == d.model.dims.n_embd);
  CHECK(c.model.dims.vocab_size == 50257);
  CHECK(c.model.dims.padded_vocab_size == 50304);
  CHECK(c.model.dims.max_seq_len == 1024);
  CHECK(c.model.given.empty());
  CHECK_FALSE(c.model.init_from.has_value());
  CHECK(c.data.format == "llmc");
  CHECK(c.data.val.empty());
  CHECK(c.data.seq_len == 256);
  CHECK(c.data.val_fraction == 0.1);
  CHECK(c.train.steps == 1000);
  CHECK(c.train.seed == 1337);
  CHECK(c.train.threads == 0);
  CHECK(c.train.save_model.empty());
  CHECK(c.train.metrics.empty());
  CHECK(c.optimizer.type == "AdamW");
  CHECK(c.optimizer.lr == 3e-4);
  CHECK(c.optimizer.beta2 == 0.999);
  CHECK(c.optimizer.weight_decay == 0.01);
  CHECK(c.scheduler.type.empty());
  CHECK(c.train_batch_size == 0);
  CHECK(c.micro_batch == 4);
  CHECK(c.grad_accum == 1);
  CHECK(c.gradient_clipping == 0.0);
  CHECK(c.steps_per_print == 10);
}

TEST_CASE("other accepted values") {
  const Config c = zt::parse_config(with({"model.init_from=gpt2_124M.bin", "model.n_layer=4",
                                          "train.save_model=out.bin", "train.metrics=m.jsonl",
                                          "train.seed=18446744073709551615", "data.shuffle=true",
                                          "optimizer.type=adamw", "optimizer.params.lr=1",
                                          "train_batch_size=8", "gradient_clipping=0"}));
  CHECK(c.model.init_from == "gpt2_124M.bin");
  CHECK(c.model.given == std::vector<std::string>{"n_layer"});
  CHECK(c.train.save_model == "out.bin");
  CHECK(c.train.metrics == "m.jsonl");
  CHECK(c.train.seed == 18446744073709551615ull);
  // Values built in code rather than parsed are signed integers; they count as non-negative too.
  json built = minimal();
  built["train"]["seed"] = 5;
  built["train"]["steps"] = 7;
  CHECK(zt::parse_config(built).train.seed == 5);
  CHECK(zt::parse_config(built).train.steps == 7);
  CHECK(c.data.shuffle);
  CHECK(c.optimizer.type == "AdamW");
  CHECK(c.optimizer.lr == 1.0);  // floats accept integers
  CHECK(c.train_batch_size == 8);
  // DeepSpeed's "Adam" is AdamW unless adam_w_mode is false.
  CHECK(zt::parse_config(with({"optimizer.type=Adam"})).optimizer.type == "AdamW");
  CHECK(zt::parse_config(with({"optimizer.type=Adam", "optimizer.params.adam_w_mode=true"})).optimizer.type == "AdamW");
  CHECK(error_of({"optimizer.type=Adam", "optimizer.params.adam_w_mode=false"}) ==
        "config: optimizer.params.adam_w_mode: false (Adam with L2 weight decay) is not implemented yet");
  CHECK(error_of({"optimizer.params.adam_w_mode=true"}) == "config: optimizer.params.adam_w_mode: unknown key");
  // val_interval 0 turns validation off, so val_batches is not looked at.
  CHECK(error_of({"train.val_interval=0", "train.val_batches=0"}) == "(no error)");
}

TEST_CASE("unknown keys at every depth") {
  CHECK(error_of({"model.n_layers=4"}) == "config: model.n_layers: unknown key (did you mean 'n_layer'?)");
  CHECK(error_of({"stpes_per_print=4"}) == "config: stpes_per_print: unknown key (did you mean 'steps_per_print'?)");
  CHECK(error_of({"whatever=1"}) == "config: whatever: unknown key");
  // A dotted name is no key, though its path reads like one.
  json dotted = minimal();
  dotted["zero_optimization.stage"] = 2;
  CHECK(error_of(dotted) == "config: zero_optimization.stage: unknown key");
  CHECK(error_of({"data.sequence=1"}) == "config: data.sequence: unknown key");
  CHECK(error_of({"train.step=5"}) == "config: train.step: unknown key (did you mean 'steps'?)");
  CHECK(error_of({"optimizer.lr=1"}) == "config: optimizer.lr: unknown key");
  CHECK(error_of({"optimizer.params.torch_adam=true"}) == "config: optimizer.params.torch_adam: unknown key");
  CHECK(error_of({"optimizer.params.betta=1"}) == "config: optimizer.params.betta: unknown key (did you mean 'betas'?)");
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.foo=1"}) == "config: scheduler.foo: unknown key");
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.params.warmup_num_step=1"}) ==
        "config: scheduler.params.warmup_num_step: unknown key (did you mean 'warmup_num_steps'?) for WarmupLR, which "
        "takes: warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type");
  // A typo is reported as such even when its default then breaks a constraint elsewhere.
  CHECK(error_of({"model.max_seq_len=128", "data.seqlen=64"}) ==
        "config: data.seqlen: unknown key (did you mean 'seq_len'?)");
}

TEST_CASE("DeepSpeed's monitors: tensorboard and csv_monitor taken, wandb and comet refused when enabled") {
  const zt::Config d = zt::parse_config(minimal());
  CHECK(!d.tensorboard.enabled);
  CHECK(d.tensorboard.output_path.empty());
  CHECK(d.csv_monitor.job_name == "DeepSpeedJobName");
  json j = minimal();
  j["tensorboard"] = {{"enabled", true}, {"output_path", "out"}, {"job_name", "run1"}};
  j["csv_monitor"] = {{"enabled", true}};
  j["wandb"] = {{"enabled", false}, {"project", "p"}, {"team", "t"}};
  j["comet"] = {{"enabled", false}, {"api_key", "k"}};
  const zt::Config c = zt::parse_config(j);
  CHECK(c.tensorboard.enabled);
  CHECK(c.tensorboard.output_path == "out");
  CHECK(c.tensorboard.job_name == "run1");
  CHECK(c.csv_monitor.enabled);
  CHECK(error_of({"wandb.enabled=true"}).find("config: wandb.enabled: is DeepSpeed's Weights & Biases monitor, which sends to a network service") == 0);
  CHECK(error_of({"comet.enabled=true"}).find("config: comet.enabled: is DeepSpeed's Comet monitor") == 0);
  CHECK(error_of({"wandb=1"}) == "config: wandb: expected an object, got 1");
  CHECK(error_of({"tensorboard.enabled=true", "tensorboard.job_name=\"\""}) ==
        "config: tensorboard.job_name: and output_path are both empty: name the folder the files go to");
  CHECK(error_of({"csv_monitor.enabled=yes"}).find("config: csv_monitor.enabled: expected") == 0);
  CHECK(error_of({"tensorboard.path=x"}).find("config: tensorboard.path: unknown key") == 0);
}

TEST_CASE("DeepSpeed keys that are not implemented yet") {
  for (const char* key : {"amp", "comms_logger",
                          "hybrid_engine", "weight_quantization", "wall_clock_breakdown"}) {
    CAPTURE(key);
    json j = minimal();
    j[key] = json::object();
    CHECK(error_of(j) == "config: " + std::string(key) + ": is a DeepSpeed key that ztrain does not implement yet");
  }
  CHECK(error_of({"optimizer.type=Lamb"}) == "config: optimizer.type: \"Lamb\" is not implemented yet (ztrain has \"AdamW\")");
  CHECK(error_of({"optimizer.type=OneBitAdam"}).find("not implemented yet") != std::string::npos);
  CHECK(error_of({"optimizer.type=SGD"}).find("config: optimizer.type: \"SGD\"") == 0);
  CHECK(error_of({"scheduler.type=OneCycle"}) ==
        "config: scheduler.type: \"OneCycle\" is a DeepSpeed scheduler that ztrain does not implement yet");
}

TEST_CASE("zero_optimization: DeepSpeed's keys, FSDP's names, and what is not there yet") {
  const Config d = zt::parse_config(minimal());
  CHECK(d.zero.stage == 0);
  CHECK(d.zero.overlap_comm);
  CHECK(d.zero.reduce_bucket_size == 500'000'000);
  CHECK(d.zero.param_persistence_threshold == 100'000);

  // A DeepSpeed stage-3 block as users write it: sizes as floats.
  const Config c = zt::parse_config(with({"zero_optimization.stage=3", "zero_optimization.overlap_comm=false",
                                          "zero_optimization.reduce_bucket_size=5e7",
                                          "zero_optimization.stage3_prefetch_bucket_size=1e6",
                                          "zero_optimization.stage3_max_live_parameters=3e8",
                                          "zero_optimization.stage3_max_reuse_distance=1e9",
                                          "zero_optimization.stage3_param_persistence_threshold=1000",
                                          "zero_optimization.allgather_bucket_size=200000",
                                          "zero_optimization.contiguous_gradients=true",
                                          "zero_optimization.reduce_scatter=false"}));
  CHECK(c.zero.stage == 3);
  CHECK_FALSE(c.zero.overlap_comm);
  CHECK_FALSE(c.zero.reduce_scatter);
  CHECK(c.zero.reduce_bucket_size == 50'000'000);
  CHECK(c.zero.prefetch_bucket_size == 1'000'000);
  CHECK(c.zero.max_live_parameters == 300'000'000);
  CHECK(c.zero.max_reuse_distance == 1'000'000'000);
  CHECK(d.zero.max_reuse_distance == 0);
  CHECK(c.zero.param_persistence_threshold == 1000);
  CHECK(c.zero.allgather_bucket_size == 200'000);

  CHECK(zt::parse_config(with({"zero_optimization.sharding_strategy=NO_SHARD"})).zero.stage == 0);
  CHECK(zt::parse_config(with({"zero_optimization.sharding_strategy=SHARD_GRAD_OP"})).zero.stage == 2);
  CHECK(zt::parse_config(with({"zero_optimization.sharding_strategy=FULL_SHARD"})).zero.stage == 3);
  CHECK(zt::parse_config(with({"zero_optimization.stage=3", "zero_optimization.sharding_strategy=FULL_SHARD"})).zero.stage == 3);
  CHECK(error_of({"zero_optimization.stage=1", "zero_optimization.sharding_strategy=FULL_SHARD"}) ==
        "config: zero_optimization.sharding_strategy: \"FULL_SHARD\" is stage 3, but zero_optimization.stage is 1");
  CHECK(error_of({"zero_optimization.sharding_strategy=full"}) ==
        "config: zero_optimization.sharding_strategy: expected \"NO_SHARD\", \"SHARD_GRAD_OP\", \"FULL_SHARD\", "
        "\"HYBRID_SHARD\" or \"_HYBRID_SHARD_ZERO2\", got \"full\"");
  // [Note: shard groups]: FSDP's hybrid strategies, DeepSpeed's MiCS and hpZ.
  const zt::Config h3 = zt::parse_config(with({"zero_optimization.sharding_strategy=HYBRID_SHARD"}));
  CHECK((h3.zero.stage == 3 && h3.zero.hybrid && h3.zero.shard_group_size == 0));
  const zt::Config h2 = zt::parse_config(
      with({"zero_optimization.sharding_strategy=_HYBRID_SHARD_ZERO2", "zero_optimization.shard_group_size=4"}));
  CHECK((h2.zero.stage == 2 && h2.zero.hybrid && h2.zero.shard_group_size == 4));
  const zt::Config mics = zt::parse_config(with({"zero_optimization.mics_shard_size=8"}));
  CHECK((mics.zero.stage == 3 && mics.zero.hybrid && mics.zero.shard_group_size == 8));
  CHECK_FALSE(zt::parse_config(with({"zero_optimization.mics_shard_size=-1"})).zero.hybrid);
  CHECK(zt::parse_config(with({"zero_optimization.stage=3", "zero_optimization.zero_hpz_partition_size=8"})).zero.hpz_partition_size == 8);
  CHECK(error_of({"zero_optimization.sharding_strategy=HYBRID_SHARD", "zero_optimization.stage=2"}) ==
        "config: zero_optimization.sharding_strategy: \"HYBRID_SHARD\" is stage 3, but zero_optimization.stage is 2");
  CHECK(error_of({"zero_optimization.stage=3", "zero_optimization.shard_group_size=2"}) ==
        "config: zero_optimization.shard_group_size: applies to sharding_strategy \"HYBRID_SHARD\" or "
        "\"_HYBRID_SHARD_ZERO2\" (or mics_shard_size) only");
  CHECK(error_of({"zero_optimization.sharding_strategy=HYBRID_SHARD", "zero_optimization.shard_group_size=0"}) ==
        "config: zero_optimization.shard_group_size: must be >= 1, got 0");
  CHECK(error_of({"zero_optimization.stage=2", "zero_optimization.mics_shard_size=2"}) ==
        "config: zero_optimization.mics_shard_size: needs zero_optimization.stage 3, got stage 2");
  CHECK(error_of({"zero_optimization.sharding_strategy=HYBRID_SHARD", "zero_optimization.shard_group_size=4",
                  "zero_optimization.mics_shard_size=2"}) ==
        "config: zero_optimization.mics_shard_size: 2 and shard_group_size 4 disagree");
  CHECK(error_of({"zero_optimization.stage=2", "zero_optimization.zero_hpz_partition_size=2"}) ==
        "config: zero_optimization.zero_hpz_partition_size: needs zero_optimization.stage 3, got stage 2");
  CHECK(error_of({"zero_optimization.sharding_strategy=HYBRID_SHARD", "zero_optimization.zero_hpz_partition_size=2"}) ==
        "config: zero_optimization.zero_hpz_partition_size: with hybrid sharding: the shard group already keeps every "
        "gather within it");
  CHECK(error_of({"zero_optimization.stage=3", "zero_optimization.zero_hpz_partition_size=2",
                  "zero_optimization.offload_param.device=cpu"}) ==
        "config: zero_optimization.zero_hpz_partition_size: with offload_param is not implemented yet (the secondary "
        "shard would stay on the device)");
  // The group against the world, where the run knows it.
  CHECK(zt::shard_group_ranks(h3.zero, 16, 8) == 8);
  CHECK(zt::shard_group_ranks(h2.zero, 16, 8) == 4);
  CHECK(zt::shard_group_ranks(zt::ZeroConfig{}, 16, 8) == 16);
  CHECK_THROWS_WITH_AS(zt::shard_group_ranks(h2.zero, 6, 6),
                       "config: zero_optimization.shard_group_size is 4, which does not divide the world size 6 into "
                       "groups of consecutive ranks", zt::ConfigError);
  CHECK(error_of({"zero_optimization.stage=4"}) == "config: zero_optimization.stage: must be 0, 1, 2 or 3, got 4");
  CHECK(error_of({"zero_optimization.stage=\"3\""}) == "config: zero_optimization.stage: expected an integer, got \"3\"");
  CHECK(error_of({"zero_optimization.reduce_bucket_size=auto"}) ==
        "config: zero_optimization.reduce_bucket_size: expected a non-negative whole number of elements, got \"auto\"");
  CHECK(error_of({"zero_optimization.reduce_bucket_size=2.5"}) ==
        "config: zero_optimization.reduce_bucket_size: expected a non-negative whole number of elements, got 2.5");
  CHECK(error_of({"zero_optimization.stage3_prefetch_bucket_size=-1"}) ==
        "config: zero_optimization.stage3_prefetch_bucket_size: expected a non-negative whole number of elements, got -1");
  CHECK(error_of({"zero_optimization.reduce_bucket_size=0"}) == "config: zero_optimization.reduce_bucket_size: must be > 0, got 0");
  CHECK(zt::parse_config(with({"zero_optimization.stage3_gather_16bit_weights_on_model_save=true"})).zero.gather_16bit_on_save);
  CHECK(zt::parse_config(with({"zero_optimization.stage3_gather_fp16_weights_on_model_save=true"})).zero.gather_16bit_on_save);
  CHECK(error_of({"zero_optimization.zero_quantized_weights=true"}) ==
        "config: zero_optimization.zero_quantized_weights: is a DeepSpeed ZeRO key that ztrain does not implement yet");
  CHECK(error_of({"zero_optimization.allgather_partitions=false"}) ==
        "config: zero_optimization.allgather_partitions: false (a broadcast per partition) is not implemented yet");
  CHECK(zt::parse_config(minimal()).train.comm_progress == "auto");
  CHECK(zt::parse_config(with({"train.comm_progress=poll"})).train.comm_progress == "poll");
  CHECK(error_of({"train.comm_progress=spin"}) ==
        "config: train.comm_progress: expected \"auto\", \"thread\" or \"poll\", got \"spin\"");
  CHECK(error_of({"zero_optimization.overlap_com=true"}) ==
        "config: zero_optimization.overlap_com: unknown key (did you mean 'overlap_comm'?)");
}

TEST_CASE("offload and aio: DeepSpeed's keys and defaults") {
  const Config d = zt::parse_config(minimal());
  CHECK_FALSE(d.zero.offload_optimizer.enabled());
  CHECK_FALSE(d.zero.offload_param.enabled());
  CHECK(d.zero.sub_group_size == 1'000'000'000);
  CHECK(d.aio.block_size == 1 << 20);
  CHECK(d.aio.queue_depth == 8);
  CHECK(d.aio.intra_op_parallelism == 1);
  CHECK_FALSE(d.aio.single_submit);
  CHECK(d.aio.overlap_events);

  const Config c = zt::parse_config(with(
      {"zero_optimization.stage=3", "zero_optimization.sub_group_size=1e6",
       "zero_optimization.offload_optimizer={\"device\": \"nvme\", \"nvme_path\": \"/nvme\", \"pin_memory\": true, "
       "\"buffer_count\": 3, \"pipeline_read\": true, \"fast_init\": false, \"ratio\": 1}",
       "zero_optimization.offload_param={\"device\": \"cpu\", \"buffer_size\": 1e7, \"max_in_cpu\": 2e8}",
       "aio={\"block_size\": 262144, \"queue_depth\": 32, \"intra_op_parallelism\": 2, \"single_submit\": true, "
       "\"overlap_events\": false, \"use_gds\": false}"}));
  const zt::OffloadConfig& o = c.zero.offload_optimizer;
  CHECK(o.device == "nvme");
  CHECK(o.nvme_path == "/nvme");
  CHECK(o.pin_memory);
  CHECK(o.buffer_count == 3);
  CHECK(o.pipeline_read);
  CHECK_FALSE(o.pipeline_write);
  CHECK(o.overlap_step);  // ztrain's default: the NVMe update runs behind the next forward
  CHECK(c.zero.sub_group_size == 1'000'000);
  const zt::OffloadConfig& p = c.zero.offload_param;
  CHECK(p.device == "cpu");
  CHECK(p.buffer_count == 5);  // DeepSpeed's default for parameters
  CHECK(p.buffer_size == 10'000'000);
  CHECK(p.max_in_cpu == 200'000'000);
  CHECK(c.aio.block_size == 262144);
  CHECK(c.aio.queue_depth == 32);
  CHECK(c.aio.intra_op_parallelism == 2);
  CHECK(c.aio.single_submit);
  CHECK_FALSE(c.aio.overlap_events);
  // The older "pipeline" sets both; thread_count is intra_op_parallelism's old name.
  const Config old = zt::parse_config(with({"zero_optimization.stage=2",
                                            "zero_optimization.offload_optimizer={\"device\": \"cpu\", \"pipeline\": true}",
                                            "aio.thread_count=3"}));
  CHECK(old.zero.offload_optimizer.pipeline_read);
  CHECK(old.zero.offload_optimizer.pipeline_write);
  CHECK(old.aio.intra_op_parallelism == 3);
  CHECK_FALSE(zt::parse_config(with({"zero_optimization.stage=1", "zero_optimization.offload_optimizer.overlap_step=false"}))
                  .zero.offload_optimizer.overlap_step);

  CHECK(error_of({"zero_optimization.stage=1", "zero_optimization.offload_optimizer.device=disk"}) ==
        "config: zero_optimization.offload_optimizer.device: expected \"none\", \"cpu\" or \"nvme\", got \"disk\"");
  CHECK(error_of({"zero_optimization.stage=1", "zero_optimization.offload_optimizer.device=nvme"}) ==
        "config: zero_optimization.offload_optimizer.nvme_path: required with device \"nvme\"");
  CHECK(error_of({"zero_optimization.offload_optimizer.device=cpu"}) ==
        "config: zero_optimization.offload_optimizer.device: needs zero_optimization.stage 1, 2 or 3 (stage 0 has no "
        "shard to offload)");
  CHECK(error_of({"zero_optimization.stage=2", "zero_optimization.offload_param.device=cpu"}) ==
        "config: zero_optimization.offload_param.device: needs zero_optimization.stage 3, got stage 2");
  CHECK(error_of({"zero_optimization.stage=1", "zero_optimization.offload_optimizer.ratio=0.5"}) ==
        "config: zero_optimization.offload_optimizer.ratio: a partial offload (ratio < 1) is not implemented yet; use 1");
  CHECK(error_of({"zero_optimization.stage=1", "zero_optimization.offload_optimizer.buffer_count=0"}) ==
        "config: zero_optimization.offload_optimizer.buffer_count: must be >= 1, got 0");
  CHECK(error_of({"zero_optimization.stage=3", "zero_optimization.offload_param.pipeline_read=true"}) ==
        "config: zero_optimization.offload_param.pipeline_read: unknown key, which offload_param does not take (it takes: "
        "device, nvme_path, pin_memory, buffer_count, buffer_size, max_in_cpu)");
  CHECK(error_of({"zero_optimization.sub_group_size=0"}) == "config: zero_optimization.sub_group_size: must be > 0, got 0");
  CHECK(error_of({"aio.block_size=1000"}) == "config: aio.block_size: must be a positive multiple of 4096 (O_DIRECT), got 1000");
  CHECK(error_of({"aio.queue_depth=0"}) == "config: aio.queue_depth: must be >= 1, got 0");
  CHECK(error_of({"aio.use_gds=true"}) == "config: aio.use_gds: GPUDirect Storage is not implemented");
  CHECK(error_of({"aio.queue_dept=4"}) == "config: aio.queue_dept: unknown key (did you mean 'queue_depth'?)");
}

TEST_CASE("checkpoint section and train.resume") {
  const Config d = zt::parse_config(minimal());
  CHECK(d.checkpoint.save_interval == 0);
  CHECK(d.train.resume.empty());
  const Config c = zt::parse_config(with({"checkpoint={\"dir\": \"/ck\", \"save_interval\": 50, \"keep_last\": 3}",
                                          "train.resume=true"}));
  CHECK(c.checkpoint.dir == "/ck");
  CHECK(c.checkpoint.save_interval == 50);
  CHECK(c.checkpoint.keep_last == 3);
  CHECK(c.train.resume == "/ck");  // true: from checkpoint.dir
  CHECK(zt::parse_config(with({"train.resume=/other/step_7"})).train.resume == "/other/step_7");
  CHECK(error_of({"checkpoint.save_interval=10"}) == "config: checkpoint.dir: required with checkpoint.save_interval");
  CHECK(error_of({"train.resume=true"}) == "config: train.resume: true (resume from checkpoint.dir) needs checkpoint.dir");
  CHECK(error_of({"checkpoint.keep_last=-1"}) == "config: checkpoint.keep_last: must be >= 0, got -1");
  CHECK(error_of({"checkpoint.tag_validation=\"Warn\""}) ==
        "config: checkpoint.tag_validation: is a DeepSpeed checkpoint key that ztrain does not implement");
}

TEST_CASE("lora section and zero_optimization.frozen_params") {
  const Config d = zt::parse_config(minimal());
  CHECK_FALSE(d.lora.enabled());
  CHECK(d.zero.frozen_params == "sharded");
  const Config c = zt::parse_config(with({"lora={\"r\": 16, \"lora_alpha\": 32, \"target_modules\": [\"q_proj\", \"v_proj\"], "
                                          "\"use_rslora\": true, \"init_from\": \"/a\"}",
                                          "zero_optimization.frozen_params=replicated"}));
  CHECK(c.lora.r == 16);
  CHECK(c.lora.alpha == 32);
  CHECK(c.lora.target_modules == std::vector<std::string>{"q_proj", "v_proj"});
  CHECK(c.lora.scale() == doctest::Approx(32 / 4.0));  // rsLoRA: alpha / sqrt(r)
  CHECK(c.lora.init_from == "/a");
  CHECK(c.zero.frozen_params == "replicated");
  CHECK(zt::parse_config(with({"lora.r=8", "lora.target_modules=all-linear"})).lora.target_modules ==
        std::vector<std::string>{"all-linear"});
  CHECK_FALSE(zt::parse_config(with({"lora.r=0"})).lora.enabled());
  CHECK(error_of({"lora.r=-1"}) == "config: lora.r: must be at least 1 (or 0: no LoRA), got -1");
  CHECK(zt::parse_config(with({"lora.r=4", "lora.lora_dropout=0.05"})).lora.dropout == 0.05);
  CHECK(error_of({"lora.r=4", "lora.dropout=1"}) == "config: lora.dropout: must be in [0, 1), got 1");
  CHECK(error_of({"lora.r=4", "lora.init=\"pissa\""}) ==
        "config: lora.init: expected \"default\" (PEFT's init_lora_weights true) or \"gaussian\", got \"pissa\"");
  CHECK(error_of({"lora.r=4", "lora.target_modules=[]"}) == "config: lora.target_modules: expected a list of module names, got []");
  CHECK(error_of({"lora.rank=4"}) == "config: lora.rank: unknown key");
  CHECK(error_of({"zero_optimization.frozen_params=\"offloaded\""}) ==
        "config: zero_optimization.frozen_params: expected \"sharded\" or \"replicated\", got \"offloaded\"");
}

TEST_CASE("activation_checkpointing: DeepSpeed's section with torchtitan's mode keys") {
  using Mode = zt::ActivationCheckpointing::Mode;
  CHECK_FALSE(zt::parse_config(minimal()).activation_checkpointing.enabled());
  // The section turns it on, as DeepSpeed's checkpoint() calls do; its own keys change nothing here.
  const Config d = zt::parse_config(with({"activation_checkpointing={\"partition_activations\": true, "
                                          "\"contiguous_memory_optimization\": false, \"number_checkpoints\": 4, "
                                          "\"synchronize_checkpoint_boundary\": false, \"profile\": false, "
                                          "\"cpu_checkpointing\": true}"}));
  CHECK(d.activation_checkpointing.mode == Mode::full);
  CHECK(d.activation_checkpointing.cpu_checkpointing);
  CHECK(d.activation_checkpointing.describe() == "full, inputs in host memory");
  const Config op = zt::parse_config(with({"activation_checkpointing.mode=selective", "activation_checkpointing.selective_ac_option=op"}));
  CHECK(op.activation_checkpointing.mode == Mode::selective_op);
  const Config k = zt::parse_config(with({"activation_checkpointing.mode=selective", "activation_checkpointing.selective_ac_option=3"}));
  CHECK(k.activation_checkpointing.mode == Mode::selective_block);
  CHECK(k.activation_checkpointing.describe() == "selective every 3rd block");
  // torchtitan's count: every k-th block from the first, 1-based.
  std::vector<int> blocks;
  for (int l = 0; l < 9; ++l)
    if (k.activation_checkpointing.checkpoints(l)) blocks.push_back(l);
  CHECK(blocks == std::vector<int>{2, 5, 8});
  CHECK(zt::parse_config(with({"activation_checkpointing.mode=selective"})).activation_checkpointing.every == 2);
  CHECK_FALSE(zt::parse_config(with({"activation_checkpointing.mode=none"})).activation_checkpointing.enabled());
  CHECK(error_of({"activation_checkpointing.mode=selective", "activation_checkpointing.selective_ac_option=\"2x\""}) ==
        "config: activation_checkpointing.selective_ac_option: expected \"op\" or a block frequency k >= 1, got \"2x\"");
  CHECK(error_of({"activation_checkpointing.mode=selective", "activation_checkpointing.selective_ac_option=[1]"}) ==
        "config: activation_checkpointing.selective_ac_option: expected \"op\" or a block frequency k >= 1, got [1]");
  CHECK(error_of({"activation_checkpointing.cpu_checkpointing=1"}).find("activation_checkpointing.cpu_checkpointing") !=
        std::string::npos);
}

TEST_CASE("bf16 and fp16: DeepSpeed's sections") {
  CHECK(zt::parse_config(minimal()).precision.dtype == "f32");
  CHECK(zt::parse_config(with({"bf16.enabled=true"})).precision.dtype == "bf16");
  CHECK(zt::parse_config(with({"bfloat16.enabled=true"})).precision.dtype == "bf16");
  CHECK(zt::parse_config(with({"bf16.enabled=false"})).precision.dtype == "f32");
  const Config c = zt::parse_config(with({"fp16.enabled=true", "fp16.initial_scale_power=12", "fp16.loss_scale_window=50",
                                          "fp16.hysteresis=1", "fp16.min_loss_scale=0.5"}));
  CHECK(c.precision.dtype == "f16");
  CHECK(c.precision.initial_scale_power == 12);
  CHECK(c.precision.loss_scale_window == 50);
  CHECK(c.precision.hysteresis == 1);
  CHECK(c.precision.min_loss_scale == 0.5);
  CHECK(error_of({"fp16.enabled=true", "bf16.enabled=true"}) ==
        "config: fp16.enabled: and bf16.enabled are both true; choose one");
  CHECK(error_of({"bf16.enabled=true", "bfloat16.enabled=true"}) ==
        "config: bfloat16: given together with bf16 (DeepSpeed takes either name, not both)");
  CHECK(error_of({"fp16.enabled=true", "fp16.hysteresis=0"}) == "config: fp16.hysteresis: must be >= 1, got 0");
  CHECK(error_of({"fp16.enabled=true", "fp16.initial_scale_power=99"}) ==
        "config: fp16.initial_scale_power: must be in [0, 64], got 99");
  CHECK(error_of({"fp16.enabled=true", "fp16.auto_cast=true"}) ==
        "config: fp16.auto_cast: is a DeepSpeed fp16 option that ztrain does not implement yet");
  CHECK(error_of({"bf16.enable=true"}) == "config: bf16.enable: unknown key (did you mean 'enabled'?)");
}

TEST_CASE("train.device: cpu by default; cuda makes bf16 the default precision") {
  CHECK(zt::parse_config(minimal()).train.device == "cpu");
  const Config gpu = zt::parse_config(with({"train.device=cuda"}));
  CHECK(gpu.train.device == "cuda");
  CHECK(gpu.precision.dtype == "bf16");
  // A precision the config names is kept, disabled or not.
  CHECK(zt::parse_config(with({"train.device=cuda", "fp16.enabled=true"})).precision.dtype == "f16");
  CHECK(zt::parse_config(with({"train.device=cuda", "bf16.enabled=false"})).precision.dtype == "f32");
  CHECK(zt::parse_config(with({"train.device=cuda", "fp16.enabled=false"})).precision.dtype == "f32");
  CHECK(error_of({"train.device=gpu"}) == "config: train.device: expected \"cpu\" or \"cuda\", got \"gpu\"");
}

TEST_CASE("train.attention: our kernels by default; cuDNN's on cuda in bf16 only") {
  CHECK(zt::parse_config(minimal()).train.attention == "ztrain");
  CHECK(zt::parse_config(with({"train.device=cuda", "train.attention=cudnn"})).train.attention == "cudnn");
  CHECK(zt::parse_config(with({"train.device=cuda", "train.attention=cudnn", "bf16.enabled=true"})).train.attention ==
        "cudnn");
  CHECK(error_of({"train.attention=flash"}) == "config: train.attention: expected \"ztrain\" or \"cudnn\", got \"flash\"");
  CHECK(error_of({"train.attention=cudnn"}) ==
        "config: train.attention: \"cudnn\" (cuDNN's fused attention) runs on cuda only; train.device is \"cpu\"");
  CHECK(error_of({"train.device=cuda", "train.attention=cudnn", "bf16.enabled=false"}) ==
        "config: train.attention: \"cudnn\" computes in bf16 only: it needs bf16.enabled (the default on cuda), not fp32");
  CHECK(error_of({"train.device=cuda", "train.attention=cudnn", "fp16.enabled=true"}) ==
        "config: train.attention: \"cudnn\" computes in bf16 only: it needs bf16.enabled (the default on cuda), not "
        "fp16, which computes in f32");
}

TEST_CASE("wrong types") {
  CHECK(error_of({"train.steps=ten"}) == "config: train.steps: expected an integer, got \"ten\"");
  CHECK(error_of({"train.steps=2.5"}) == "config: train.steps: expected an integer, got 2.5");
  CHECK(error_of({"train.steps=3.0"}) == "config: train.steps: expected an integer, got 3.0");
  CHECK(error_of({"train.steps=3000000000"}) == "config: train.steps: 3000000000 does not fit in a 32-bit integer");
  CHECK(error_of({"train.seed=-1"}) == "config: train.seed: expected a non-negative integer, got -1");
  CHECK(error_of({"data.shuffle=1"}) == "config: data.shuffle: expected true or false, got 1");
  CHECK(error_of({"data.train=5"}) == "config: data.train: expected a string, got 5");
  CHECK(error_of({"optimizer.params.lr=\"fast\""}) == "config: optimizer.params.lr: expected a number, got \"fast\"");
  CHECK(error_of({"model.init_from=3"}) == "config: model.init_from: expected a string or null, got 3");
  CHECK(error_of({"model.init_from=\"\""}) == "config: model.init_from: must be a path or null, got \"\"");
  CHECK(error_of({"optimizer.params.betas=[0.9]"}) ==
        "config: optimizer.params.betas: expected an array of 2 numbers, got [0.9]");
  CHECK(error_of({"optimizer.params.betas=[0.9,0.95,0.99]"}) ==
        "config: optimizer.params.betas: expected an array of 2 numbers, got [0.9,0.95,0.99]");
  CHECK(error_of({"optimizer.params.betas=[0.9,\"x\"]"}).find("expected an array of 2 numbers") != std::string::npos);
  CHECK(error_of({"optimizer.params.betas=0.9"}).find("expected an array of 2 numbers") != std::string::npos);
  CHECK(error_of({"optimizer.params.betas=[0.9,1.0]"}) == "config: optimizer.params.betas[1]: must be in [0, 1), got 1");
  CHECK(error_of({"optimizer.params.betas=[-0.1,0.9]"}) == "config: optimizer.params.betas[0]: must be in [0, 1), got -0.1");
  // A long value is cut so the message stays one readable line.
  const std::string long_err = error_of({"train.steps=" + std::string(100, 'x')});
  CHECK(long_err.size() < 120);
  CHECK(long_err.find("...") != std::string::npos);
}

TEST_CASE("sections that are not objects") {
  CHECK(error_of(json(3)) == "config: top level: expected an object, got 3");
  CHECK(error_of(json::array()) == "config: top level: expected an object, got []");
  CHECK(error_of({"model=3"}) == "config: model: expected an object, got 3");
  CHECK(error_of({"data=\"x\""}) == "config: data: expected an object, got \"x\"");
  CHECK(error_of({"train=[]"}) == "config: train: expected an object, got []");
  CHECK(error_of({"optimizer.params=null"}) == "config: optimizer.params: expected an object, got null");
  CHECK(error_of({"scheduler=true"}) == "config: scheduler: expected an object, got true");
}

TEST_CASE("required keys") {
  CHECK(error_of(json::object()) == "config: data.train: required key missing");
  CHECK(error_of(json{{"data", {{"format", "llmc"}}}}) == "config: data.train: required key missing");
  CHECK(error_of({"data.train=\"\""}) == "config: data.train: must not be empty");
  CHECK(error_of({"scheduler.params.warmup_num_steps=10"}) == "config: scheduler.type: required key missing");
}

TEST_CASE("impossible model values") {
  for (const char* key : {"n_layer", "n_head", "n_embd", "vocab_size", "padded_vocab_size", "max_seq_len"}) {
    CAPTURE(key);
    CHECK(error_of({"model." + std::string(key) + "=0"}) == "config: model." + std::string(key) + ": must be >= 1, got 0");
  }
  CHECK(error_of({"model.arch=llama3"}) ==
        "config: model.arch: \"llama3\" is not implemented (expected \"gpt2\", \"llama\", \"qwen3\" or \"gemma3\")");
  CHECK(error_of({"model.n_embd=770"}) == "config: model.n_embd: 770 is not divisible by model.n_head 12");
  // The Llama family's keys: refused for GPT-2, checked for llama; an architecture's missing dim
  // refused (Qwen3's q/k/v have no biases).
  CHECK(error_of({"model.n_kv_head=4"}) == "config: model.n_kv_head: does not apply to GPT-2 (model.arch \"gpt2\")");
  CHECK(error_of({"model.rope_scaling={\"rope_type\": \"llama3\"}"}) ==
        "config: model.rope_scaling.rope_type: does not apply to GPT-2 (model.arch \"gpt2\")");
  CHECK(error_of({"model.arch=qwen3", "model.attention_bias=true"}) ==
        "config: model.attention_bias: does not apply to Qwen3 (model.arch \"qwen3\")");
  CHECK(error_of({"model.arch=qwen3", "model.head_dim=7"}) ==
        "config: model.head_dim: must be even (RoPE rotates pairs), got 7");
  CHECK(error_of({"model.arch=llama", "model.n_kv_head=5"}) == "config: model.n_kv_head: 5 does not divide model.n_head 12");
  CHECK(error_of({"model.arch=llama", "model.rope_scaling={\"rope_type\": \"yarn\"}"}) ==
        "config: model.rope_scaling.rope_type: expected \"default\" or \"llama3\", got \"yarn\"");
  CHECK(error_of({"model.arch=llama", "model.rope_scaling={\"rope_type\": \"llama3\", \"high_freq_factor\": 0.5}"}) ==
        "config: model.rope_scaling.high_freq_factor: must be > low_freq_factor 1, got 0.5");
  CHECK(error_of({"model.arch=llama", "model.rope_scaling={\"factr\": 2}"}).find("unknown key (did you mean 'factor'?)") !=
        std::string::npos);
  CHECK(error_of({"model.arch=llama", "model.rms_norm_eps=0"}) == "config: model.rms_norm_eps: must be > 0, got 0");
  CHECK(error_of({"model.arch=llama", "model.head_dim=7"}) == "config: model.head_dim: must be even (RoPE rotates pairs), got 7");
  CHECK(error_of({"model.arch=llama", "train.save_model=m.bin"}) ==
        "config: train.save_model: \"m.bin\": llm.c's format holds GPT-2 only; name a .safetensors file for model.arch \"llama\"");
  CHECK(error_of({"model.arch=llama", "model.n_kv_head=4", "model.head_dim=16", "model.n_embd=40"}) == "(no error)");
  CHECK(error_of({"model.padded_vocab_size=50000"}) ==
        "config: model.padded_vocab_size: 50000 must be >= model.vocab_size 50257");
  CHECK(error_of({"model.max_seq_len=128"}) == "config: data.seq_len: 256 must be <= model.max_seq_len 128");
  // With init_from the checkpoint fills in what is not given, so only given pairs are related.
  CHECK(error_of({"model.init_from=c.bin", "data.seq_len=2048"}) == "(no error)");
  CHECK(error_of({"model.init_from=c.bin", "model.n_head=7"}) == "(no error)");
  CHECK(error_of({"model.init_from=c.bin", "model.vocab_size=60000"}) == "(no error)");
  CHECK(error_of({"model.init_from=c.bin", "model.n_head=7", "model.n_embd=64"}) ==
        "config: model.n_embd: 64 is not divisible by model.n_head 7");
  CHECK(error_of({"model.init_from=c.bin", "model.max_seq_len=128"}) ==
        "config: data.seq_len: 256 must be <= model.max_seq_len 128");
}

TEST_CASE("impossible data and train values") {
  CHECK(error_of({"data.format=parquet"}) == "config: data.format: expected \"llmc\", \"bytes\" or \"chat\", got \"parquet\"");
  CHECK(error_of({"data.seq_len=0"}) == "config: data.seq_len: must be >= 1, got 0");
  CHECK(error_of({"data.format=bytes", "data.val_fraction=0"}) == "config: data.val_fraction: must be in (0, 0.5], got 0");
  CHECK(error_of({"data.format=bytes", "data.val_fraction=0.6"}) == "config: data.val_fraction: must be in (0, 0.5], got 0.6");
  CHECK(error_of({"data.format=bytes", "data.val_fraction=0.5"}) == "(no error)");
  CHECK(error_of({"data.val_fraction=0.2"}) == "config: data.val_fraction: only applies to data.format \"bytes\" and \"chat\"");
  CHECK(error_of({"data.packing=true"}) ==
        "config: data: tokenizer, chat_template, packing and system apply to data.format \"chat\" only");
  CHECK(error_of({"data.format=chat"}).starts_with("config: data.tokenizer: chat data needs a tokenizer"));
  CHECK(error_of({"data.format=chat", "data.tokenizer=t.json", "data.val_fraction=0.2"}) == "(no error)");
  CHECK(error_of({"data.format=bytes", "data.val=v.txt", "data.val_fraction=0.2"}) ==
        "config: data.val_fraction: has no effect when data.val is set");
  CHECK(error_of({"train.steps=0"}) == "config: train.steps: must be >= 1, got 0");
  CHECK(error_of({"train.threads=-1"}) == "config: train.threads: must be in [0, 1024], got -1");
  CHECK(error_of({"train.threads=100000"}) == "config: train.threads: must be in [0, 1024], got 100000");
  CHECK(error_of({"train.threads=1024"}) == "(no error)");
  CHECK(error_of({"train.comm_timeout_s=1e300"}) ==
        "config: train.comm_timeout_s: must be in [0, 1e7] seconds (0 waits forever), got 1e+300");
  CHECK(error_of({"train.comm_timeout_s=0"}) == "(no error)");
  // Validation asked for with llm.c shards and no data.val would silently never run; the default
  // interval with no val is fine (there is just nothing to validate).
  CHECK(error_of({"data.val=\"\"", "train.val_interval=5"}) ==
        "config: train.val_interval: 5 asks for validation, but data.val names no validation shards "
        "(give data.val, or 0 for none)");
  CHECK(error_of({"data.val=\"\"", "train.val_interval=0"}) == "(no error)");
  CHECK(error_of({"data.format=bytes", "data.val=\"\"", "train.val_interval=5"}) == "(no error)");
  CHECK(error_of({"train.val_interval=-1"}) == "config: train.val_interval: must be >= 0, got -1");
  CHECK(error_of({"train.val_batches=0"}) == "config: train.val_batches: must be >= 1, got 0");
}

TEST_CASE("impossible batch and optimizer values") {
  CHECK(error_of({"train_micro_batch_size_per_gpu=0"}) == "config: train_micro_batch_size_per_gpu: must be >= 1, got 0");
  CHECK(error_of({"gradient_accumulation_steps=0"}) == "config: gradient_accumulation_steps: must be >= 1, got 0");
  CHECK(error_of({"train_batch_size=0"}) == "config: train_batch_size: must be >= 1, got 0");
  CHECK(error_of({"gradient_clipping=-1"}) == "config: gradient_clipping: must be >= 0, got -1");
  CHECK(error_of({"steps_per_print=0"}) == "config: steps_per_print: must be >= 1, got 0");
  CHECK(error_of({"optimizer.params.lr=0"}) == "config: optimizer.params.lr: must be > 0, got 0");
  CHECK(error_of({"optimizer.params.eps=-1e-8"}) == "config: optimizer.params.eps: must be > 0, got -1e-08");
  CHECK(error_of({"optimizer.params.weight_decay=-0.1"}) == "config: optimizer.params.weight_decay: must be >= 0, got -0.1");
}

TEST_CASE("bytes format fills in the vocabulary") {
  const Config c = zt::parse_config(with({"data.format=bytes", "data.train=a.txt:b/"}));
  CHECK(c.model.dims.vocab_size == 256);
  CHECK(c.model.dims.padded_vocab_size == 256);
  CHECK(c.model.given.empty());  // filled in, not given
  const Config p = zt::parse_config(with({"data.format=bytes", "model.padded_vocab_size=512"}));
  CHECK(p.model.dims.vocab_size == 256);
  CHECK(p.model.dims.padded_vocab_size == 512);
  CHECK(p.model.given == std::vector<std::string>{"padded_vocab_size"});
  const Config v = zt::parse_config(with({"data.format=bytes", "model.vocab_size=256"}));
  CHECK(v.model.dims.padded_vocab_size == 256);
  CHECK(v.model.given == std::vector<std::string>{"vocab_size"});
  CHECK(error_of({"data.format=bytes", "model.vocab_size=50257"}) ==
        "config: model.vocab_size: must be 256 for data.format \"bytes\", got 50257");
  CHECK(error_of({"data.format=bytes", "model.padded_vocab_size=128"}) ==
        "config: model.padded_vocab_size: 128 must be >= model.vocab_size 256");
}

TEST_CASE("padded_vocab_size defaults to vocab_size rounded up to a multiple of 128, as llm.c pads it") {
  CHECK(zt::parse_config(minimal()).model.dims.padded_vocab_size == 50304);
  CHECK(zt::parse_config(with({"model.vocab_size=256"})).model.dims.padded_vocab_size == 256);
  CHECK(zt::parse_config(with({"model.vocab_size=50257"})).model.dims.padded_vocab_size == 50304);
  CHECK(zt::parse_config(with({"model.vocab_size=1000"})).model.dims.padded_vocab_size == 1024);
  CHECK(zt::parse_config(with({"model.vocab_size=2147483647"})).model.dims.padded_vocab_size == 2147483647);
  CHECK(zt::parse_config(with({"model.vocab_size=256", "model.padded_vocab_size=50304"})).model.dims.padded_vocab_size == 50304);
  const Config c = zt::parse_config(with({"model.vocab_size=300"}));
  CHECK(c.model.given == std::vector<std::string>{"vocab_size"});  // filled in, not given
  CHECK(error_of({"model.vocab_size=256", "model.padded_vocab_size=200"}) ==
        "config: model.padded_vocab_size: 200 must be >= model.vocab_size 256");
}

TEST_CASE("schedulers") {
  const Config w = zt::parse_config(with({"scheduler.type=WarmupLR", "scheduler.params.warmup_min_lr=0",
                                          "scheduler.params.warmup_max_lr=0.001", "scheduler.params.warmup_num_steps=100",
                                          "scheduler.params.warmup_type=linear"}));
  CHECK(w.scheduler.type == "WarmupLR");
  CHECK(w.scheduler.warmup_max_lr == 0.001);
  CHECK(w.scheduler.warmup_num_steps == 100);
  CHECK(w.scheduler.warmup_type == "linear");
  CHECK(zt::parse_config(with({"scheduler.type=WarmupLR"})).scheduler.warmup_type == "log");

  const Config d = zt::parse_config(with({"scheduler.type=WarmupDecayLR", "scheduler.params.total_num_steps=5000"}));
  CHECK(d.scheduler.total_num_steps == 5000);
  const Config cos = zt::parse_config(with({"scheduler.type=WarmupCosineLR", "scheduler.params.total_num_steps=5000",
                                            "scheduler.params.warmup_min_ratio=0.1", "scheduler.params.cos_min_ratio=0.01"}));
  CHECK(cos.scheduler.warmup_min_ratio == 0.1);
  CHECK(cos.scheduler.cos_min_ratio == 0.01);

  CHECK(error_of({"scheduler.type=Cosine"}) ==
        "config: scheduler.type: unknown scheduler \"Cosine\" (expected WarmupLR, WarmupDecayLR or WarmupCosineLR)");
  // Each scheduler takes only its own params.
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.params.total_num_steps=10"}) ==
        "config: scheduler.params.total_num_steps: unknown key for WarmupLR, which takes: warmup_min_lr, "
        "warmup_max_lr, warmup_num_steps, warmup_type");
  CHECK(error_of({"scheduler.type=WarmupCosineLR", "scheduler.params.total_num_steps=10",
                  "scheduler.params.warmup_max_lr=0.1"})
            .find("config: scheduler.params.warmup_max_lr: unknown key") == 0);
  CHECK(error_of({"scheduler.type=WarmupDecayLR", "scheduler.params.total_num_steps=10",
                  "scheduler.params.cos_min_ratio=0.1"})
            .find("config: scheduler.params.cos_min_ratio: unknown key for WarmupDecayLR") == 0);

  CHECK(error_of({"scheduler.type=WarmupDecayLR"}) ==
        "config: scheduler.params.total_num_steps: required key missing (WarmupDecayLR needs it)");
  CHECK(error_of({"scheduler.type=WarmupCosineLR", "scheduler.params.warmup_num_steps=0"}) ==
        "config: scheduler.params.total_num_steps: required key missing (WarmupCosineLR needs it)");
  CHECK(error_of({"scheduler.type=WarmupDecayLR", "scheduler.params.total_num_steps=0",
                  "scheduler.params.warmup_num_steps=0"}) ==
        "config: scheduler.params.total_num_steps: must be > 0, got 0");
  CHECK(error_of({"scheduler.type=WarmupDecayLR", "scheduler.params.total_num_steps=500"}) ==
        "config: scheduler.params.total_num_steps: 500 must be >= scheduler.params.warmup_num_steps 1000");
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.params.warmup_num_steps=-1"}) ==
        "config: scheduler.params.warmup_num_steps: must be >= 0, got -1");
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.params.warmup_num_steps=1"}) ==
        "config: scheduler.params.warmup_num_steps: must not be 1 with warmup_type \"log\" (use 0, >= 2 or \"linear\")");
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.params.warmup_num_steps=1",
                  "scheduler.params.warmup_type=linear"}) == "(no error)");
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.params.warmup_type=cosine"}) ==
        "config: scheduler.params.warmup_type: expected \"log\" or \"linear\", got \"cosine\"");
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.params.warmup_max_lr=0"}) ==
        "config: scheduler.params.warmup_max_lr: must be > 0, got 0");
  CHECK(error_of({"scheduler.type=WarmupLR", "scheduler.params.warmup_min_lr=-1"}) ==
        "config: scheduler.params.warmup_min_lr: must be >= 0, got -1");
  CHECK(error_of({"scheduler.type=WarmupCosineLR", "scheduler.params.total_num_steps=5000",
                  "scheduler.params.cos_min_ratio=2"}) ==
        "config: scheduler.params.cos_min_ratio: must be in [0, 1], got 2");
}

TEST_CASE("check_batch_size") {
  Config c = zt::parse_config(with({"train_batch_size=32", "train_micro_batch_size_per_gpu=4",
                                    "gradient_accumulation_steps=2"}));
  CHECK_THROWS_WITH_AS(zt::check_batch_size(c, 2),
                       "config: train_batch_size: 32 != train_micro_batch_size_per_gpu 4 * "
                       "gradient_accumulation_steps 2 * world size 2 = 16",
                       ConfigError);
  CHECK_NOTHROW(zt::check_batch_size(c, 4));
  c.train_batch_size = 0;  // not given: any world size goes
  CHECK_NOTHROW(zt::check_batch_size(c, 3));
}

TEST_CASE("overrides") {
  json j = minimal();
  zt::apply_override(j, "train.steps=20");
  CHECK(j["train"]["steps"] == 20);
  zt::apply_override(j, "optimizer.params.lr=1e-3");
  CHECK(j["optimizer"]["params"]["lr"] == 1e-3);
  zt::apply_override(j, "data.train=other/*.bin");  // not JSON: a plain string
  CHECK(j["data"]["train"] == "other/*.bin");
  zt::apply_override(j, "data.val=\"123\"");  // JSON string
  CHECK(j["data"]["val"] == "123");
  zt::apply_override(j, "data.shuffle=true");
  CHECK(j["data"]["shuffle"] == true);
  zt::apply_override(j, "model.init_from=null");
  CHECK(j["model"]["init_from"].is_null());
  zt::apply_override(j, "optimizer.params.betas=[0.8, 0.9]");
  CHECK(j["optimizer"]["params"]["betas"] == json{0.8, 0.9});
  zt::apply_override(j, "train.metrics=a=b");  // only the first '=' splits
  CHECK(j["train"]["metrics"] == "a=b");
  zt::apply_override(j, "train.save_model=");
  CHECK(j["train"]["save_model"] == "");
  zt::apply_override(j, "train.steps=30");  // a later one wins
  const Config c = zt::parse_config(j);
  CHECK(c.train.steps == 30);
  CHECK(c.optimizer.lr == 1e-3);
  CHECK(c.optimizer.beta1 == 0.8);
  CHECK(c.data.train == "other/*.bin");

  json empty;  // null becomes an object
  zt::apply_override(empty, "a.b.c=1");
  CHECK(empty == json::parse(R"({"a": {"b": {"c": 1}}})"));

  CHECK_THROWS_WITH_AS(zt::apply_override(j, "train.steps.x=1"),
                       "config: train.steps: --set 'train.steps.x=1' needs an object here, found 30", ConfigError);
  json scalar = 3;
  CHECK_THROWS_WITH_AS(zt::apply_override(scalar, "a=1"), doctest::Contains("config: top level: "), ConfigError);
  for (const char* bad : {"xyz", "=5", ".a=1", "a..b=1", "a.=1", ""}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(zt::apply_override(j, bad), ("config: --set '" + std::string(bad) + "': expected dotted.key=value").c_str(),
                         ConfigError);
  }
}

TEST_CASE("load_config") {
  TempDir dir;
  const std::string good = dir.write("good.json", kExample);
  const Config c = zt::load_config(good, {"train.steps=5", "scheduler.type=WarmupLR"});
  CHECK(c.train.steps == 5);
  CHECK(c.scheduler.type == "WarmupLR");
  CHECK(c.model.dims.n_embd == 768);

  const std::string missing = (dir.path / "nope.json").string();
  CHECK_THROWS_WITH_AS(zt::load_config(missing), ("config: cannot read '" + missing + "': No such file or directory").c_str(),
                       ConfigError);
  CHECK_THROWS_WITH_AS(zt::load_config(dir.path.string()), doctest::Contains("Is a directory"), ConfigError);

  const std::string bad = dir.write("bad.json", "{\n  \"model\": {\"n_layer\": 12,}\n}\n");
  try {
    zt::load_config(bad);
    FAIL("no error");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("config: '" + bad + "' is not valid JSON: ") == 0);
    CHECK(msg.find("line 2, column 27") != std::string::npos);
    CHECK(msg.find("[json.exception") == std::string::npos);
  }
  // A number beyond a double's range is nlohmann's out_of_range, not a parse_error (found by
  // fuzz/fuzz_config): still a ConfigError naming the file.
  const std::string huge = dir.write("huge.json", R"({"train": {"steps": 2e99999}})");
  CHECK_THROWS_WITH_AS(zt::load_config(huge), doctest::Contains("is not valid JSON: number overflow"), ConfigError);

  const std::string dup = dir.write("dup.json", R"({"data": {"train": "a"}, "optimizer": {"params": {"lr": 1, "lr": 2}}})");
  CHECK_THROWS_WITH_AS(zt::load_config(dup), "config: optimizer.params.lr: duplicate key", ConfigError);
  const std::string dup_top = dir.write("dup_top.json", R"({"data": {"train": "a"}, "x": [1, {"a": 1}], "data": {}})");
  CHECK_THROWS_WITH_AS(zt::load_config(dup_top), "config: data: duplicate key", ConfigError);

  // Errors found after loading still name the key, and overrides are checked like the file.
  CHECK_THROWS_WITH_AS(zt::load_config(good, {"train.stepz=5"}),
                       "config: train.stepz: unknown key (did you mean 'steps'?)", ConfigError);
  CHECK_THROWS_WITH_AS(zt::load_config(good, {"oops"}), "config: --set 'oops': expected dotted.key=value", ConfigError);
}

TEST_CASE("values nested deep or huge") {
  // A value is shown cut to one line, and never serialised whole: 100,000 arrays deep would
  // overflow the stack of a recursive dump.
  json deep = json::array();
  for (int i = 0; i < 100000; ++i) deep = json::array({std::move(deep)});
  json j = minimal();
  j["model"] = std::move(deep);
  CHECK(error_of(j) == "config: model: expected an object, got " + std::string(57, '[') + "...");
  json wide = minimal();
  wide["train"] = json(std::vector<int>(1000000, 7));
  CHECK(error_of(wide) == "config: train: expected an object, got [7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,...");
  json text = minimal();
  text["train"] = {{std::string(1000, 'k'), std::string(1000000, 'v')}};
  CHECK(error_of(text) == "config: train." + std::string(1000, 'k') + ": unknown key");
  text["data"]["val"] = json::array({std::string(100000, 'v')});
  CHECK(error_of(text) == "config: data.val: expected a string, got [\"" + std::string(55, 'v') + "...");

  // A file that never ends (or a data file given by mistake) is not read whole.
  CHECK_THROWS_WITH_AS(zt::load_config("/dev/zero"),
                       "config: '/dev/zero' is larger than 16 MiB, which no config is (a config file is a few KiB)", ConfigError);

  // The file and --set refuse depths no key has, before building them.
  TempDir dir;
  const std::string nested = dir.write("deep.json", "{\"model\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  CHECK_THROWS_WITH_AS(zt::load_config(nested),
                       ("config: '" + nested + "': arrays or objects nest more than 32 deep (no key nests more than 4)").c_str(),
                       ConfigError);
  const std::string ok = dir.write("ok.json", "{\"data\": {\"train\": \"a\"}, \"model\": " + std::string(31, '[') +
                                                  std::string(31, ']') + "}");
  CHECK_THROWS_WITH_AS(zt::load_config(ok), doctest::Contains("config: model: expected an object, got [[[["), ConfigError);
  json k = minimal();
  CHECK_THROWS_WITH_AS(zt::apply_override(k, "model=" + std::string(60000, '[') + std::string(60000, ']')),
                       "config: --set model: the value's arrays or objects nest more than 32 deep (no key nests more than 4)",
                       ConfigError);
  zt::apply_override(k, "optimizer.params.betas=[0.8, 0.9]");
}

// Sets `value` at the dotted `key` of j, making the sections on the way.
void set_at(json& j, const std::string& key, const json& value) {
  json* at = &j;
  for (size_t start = 0;;) {
    const size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      (*at)[part] = value;
      return;
    }
    if (!(*at)[part].is_object()) (*at)[part] = json::object();
    at = &(*at)[part];
    start = dot + 1;
  }
}

// [Note: one declaration per key]: every key the table declares is one the reader takes (never
// "unknown key", whatever else its value alone breaks); refused keys are refused by name.
TEST_CASE("the table's keys are the reader's") {
  const auto table = zt::config_table();
  CHECK(table.size() > 200);
  std::set<std::string> keys;
  for (const zt::KeySpec& k : table) {
    CAPTURE(k.key);
    CHECK_MESSAGE(keys.insert(k.key).second, k.key << " declared twice");
    CHECK(!k.doc.empty());
    json j = with(zt::test::example_context(k.key));
    json value = zt::test::example_of(k).value;
    if (k.role == zt::KeyRole::refused) {
      const json taken = k.accepts ? json::parse(k.accepts) : json(nullptr);
      value = k.type == zt::KeyType::object ? json{{"enabled", true}} : taken.is_boolean() ? json(!taken.get<bool>()) : json(0.5);
    }
    if (k.role == zt::KeyRole::ignored || k.role == zt::KeyRole::alias) value = k.type == zt::KeyType::integer ? json(1) : json(true);
    if (value.is_null()) value = json::parse(zt::key_default(k).empty() ? "null" : zt::key_default(k));
    set_at(j, k.key, value);
    const std::string e = error_of(j);
    CHECK_MESSAGE(e.find("unknown key") == std::string::npos, e);
    if (k.role == zt::KeyRole::refused) CHECK_MESSAGE(e.find(k.custom ? "network service" : k.refusal) != std::string::npos, e);
  }
  auto listed = [&](const std::string& key, const std::string& type, const std::string& fallback) {
    const zt::KeySpec* k = zt::find_key(key);
    return k && zt::key_type(*k) == type && zt::key_default(*k) == fallback;
  };
  CHECK(listed("zero_optimization.stage", "integer", "0"));
  CHECK(listed("train.seed", "integer >= 0", "1337"));
  CHECK(listed("data.chat_template", "string", "\"chatml\""));
  CHECK(listed("lora.use_rslora", "true|false", "false"));
  CHECK(listed("zero_optimization.reduce_bucket_size", "count (5e8 too)", "500000000"));
  CHECK(listed("zero_optimization.offload_param.buffer_count", "integer", "5"));
  CHECK(listed("checkpoint.parallel_write", "refused (not implemented)", ""));
  CHECK(listed("model.n_layer", "integer", "12"));
  CHECK(zt::key_range(*zt::find_key("data.val_fraction")) == "in (0, 0.5]");
  CHECK(zt::key_range(*zt::find_key("train.device")) == "\"cpu\" or \"cuda\"");
}

// Every setting the table declares goes from a file into Config and reads back: set to a value
// other than its default, it reads as that value.
TEST_CASE("every setting round-trips through JSON") {
  int settings = 0;
  for (const zt::KeySpec& k : zt::config_table()) {
    if (k.role != zt::KeyRole::value) continue;
    CAPTURE(k.key);
    const zt::test::KeyExample e = zt::test::example_of(k);
    REQUIRE_MESSAGE(!e.value.is_null(), "no example value for " << k.key);
    json j = with(zt::test::example_context(k.key));
    set_at(j, k.key, e.value);
    const std::string err = error_of(j);
    REQUIRE_MESSAGE(err == "(no error)", err);
    const Config c = zt::parse_config(j);
    CHECK(zt::key_value(k, c) == e.reads_as);
    if (k.key != "optimizer.type") CHECK(zt::key_value(k, c) != zt::key_value(k, zt::parse_config(with(zt::test::example_context(k.key)))));
    ++settings;
  }
  CHECK(settings > 120);
}

TEST_CASE("the rows' ranges are checked, with the rows' words") {
  CHECK(error_of({"train.threads=-1"}) == "config: train.threads: must be in [0, 1024], got -1");
  CHECK(error_of({"train.comm_progress=fast"}) == "config: train.comm_progress: expected \"auto\", \"thread\" or \"poll\", got \"fast\"");
  CHECK(error_of({"zero_optimization.offload_param.buffer_size=0", "zero_optimization.stage=3"}) ==
        "config: zero_optimization.offload_param.buffer_size: must be > 0, got 0");
  // A range that holds only where it applies: fp16's with fp16 on.
  CHECK(error_of({"fp16.hysteresis=0"}) == "(no error)");
  CHECK(error_of({"fp16.enabled=true", "fp16.hysteresis=0"}) == "config: fp16.hysteresis: must be >= 1, got 0");
}
