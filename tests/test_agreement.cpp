// What the ranks agree on ([Note: ranks agree on the run] in runtime/agreement.hpp), on configs
// alone: each shared setting is one config key, changing a setting that decides the run changes
// exactly its entry, and a rank's own settings change none. tests/hostile/10_ranks.sh launches
// ranks that disagree.
#include "runtime/agreement.hpp"
#include "tests/config_examples.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include <set>
#include <string>
#include <vector>

using nlohmann::json;

namespace {

using Settings = std::vector<std::pair<std::string, std::string>>;

Settings settings_with(const std::vector<std::string>& sets) {
  json j = {{"data", {{"train", "shards/*_train_*.bin"}, {"val", "shards/*_val_*.bin"}}}, {"checkpoint", {{"dir", "ck"}}}};
  for (const auto& s : sets) zt::apply_override(j, s);
  return zt::shared_settings(zt::parse_config(j));
}

// The keys whose values differ between a and b.
std::vector<std::string> changed(const Settings& a, const Settings& b) {
  std::vector<std::string> keys;
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].first == b[i].first);
    if (a[i].second != b[i].second) keys.push_back(a[i].first);
  }
  return keys;
}

}  // namespace

TEST_CASE("every shared setting is named once") {
  std::set<std::string> seen;
  // Plain names, not structured bindings: clang 14 cannot capture those in doctest's macros.
  for (const auto& setting : settings_with({})) {
    const std::string& key = setting.first;
    CHECK_MESSAGE(seen.insert(key).second, key << " twice");
  }
}

TEST_CASE("a setting that decides the run changes its own entry, and only that") {
  const Settings base = settings_with({});
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"zero_optimization.stage=2", {"zero_optimization.stage"}},
      {"zero_optimization.sharding_strategy=FULL_SHARD", {"zero_optimization.stage"}},
      {"model.n_layer=2", {"model.n_layer"}},
      {"optimizer.params.lr=0.001", {"optimizer.params.lr"}},
      {"optimizer.params.betas=[0.8, 0.95]", {"optimizer.params.betas"}},
      {"train.seed=7", {"train.seed"}},
      {"train.steps=6", {"train.steps"}},
      {"train.val_interval=3", {"train.val_interval"}},
      {"train.save_model=m.bin", {"train.save_model"}},
      {"train.trace=t.json", {"train.trace"}},
      {"train.resume=true", {"train.resume"}},
      {"train.device=cuda", {"train.device", "bf16.enabled"}},  // cuda's default precision
      {"data.shuffle=true", {"data.shuffle"}},
      {"train_micro_batch_size_per_gpu=2", {"train_micro_batch_size_per_gpu"}},
      {"gradient_accumulation_steps=2", {"gradient_accumulation_steps"}},
      {"bf16.enabled=true", {"bf16.enabled"}},
      {"fp16.enabled=true", {"fp16.enabled"}},
      {"checkpoint.save_interval=5", {"checkpoint.save_interval"}},
      {"checkpoint.dir=other", {"checkpoint.dir"}},
      {"checkpoint.overwrite=true", {"checkpoint.overwrite"}},
      {"train.skip_nonfinite_steps=2", {"train.skip_nonfinite_steps"}},
  };
  for (const auto& c : cases) {
    const std::string& set = c.first;
    CAPTURE(set);
    CHECK(changed(base, settings_with({set})) == c.second);
  }
}

// Chat data is rendered and tokenized on every rank, and the attention kernels decide the numbers:
// each of these keys once slipped past the agreement.
TEST_CASE("chat data's rendering, the attention kernels and the adapters' start are agreed on") {
  const Settings chat = settings_with({"data.format=chat", "data.tokenizer=a/tokenizer.json"});
  const std::pair<std::string, std::string> cases[] = {
      {"data.tokenizer=b/tokenizer.json", "data.tokenizer"},
      {"data.chat_template=llama3", "data.chat_template"},
      {"data.packing=true", "data.packing"},
      {"data.system=Be brief.", "data.system"},
  };
  for (const auto& c : cases) {
    const std::string& set = c.first;
    CAPTURE(set);
    CHECK(changed(chat, settings_with({"data.format=chat", "data.tokenizer=a/tokenizer.json", set})) ==
          std::vector<std::string>{c.second});
  }
  const Settings cuda = settings_with({"train.device=cuda"});
  CHECK(changed(cuda, settings_with({"train.device=cuda", "train.attention=cudnn"})) ==
        std::vector<std::string>{"train.attention"});
  const Settings lora = settings_with({"lora.r=4"});
  CHECK(changed(lora, settings_with({"lora.r=4", "lora.init_from=adapter"})) == std::vector<std::string>{"lora.init_from"});
}

// [Note: one declaration per key]: the ranks compare every setting of the table but those marked
// per_rank; ranks that differ in any one are told which.
TEST_CASE("every setting is compared unless it is a rank's own") {
  int agreed = 0;
  std::set<std::string> own;
  for (const zt::KeySpec& k : zt::config_table()) {
    if (k.role != zt::KeyRole::value) continue;
    CAPTURE(k.key);
    const zt::test::KeyExample e = zt::test::example_of(k);
    std::vector<std::string> sets = e.context;
    const Settings base = settings_with(sets);
    sets.push_back(k.key + "=" + e.value.dump());
    const std::vector<std::string> keys = changed(base, settings_with(sets));
    if (k.per_rank) {
      CHECK(keys.empty());
      own.insert(k.key);
    } else if (e.reads_as != e.value) {
      CHECK(keys.empty());  // optimizer.type: Adam is AdamW here, so ranks giving either run alike
    } else {
      CHECK(std::find(keys.begin(), keys.end(), k.key) != keys.end());
      ++agreed;
    }
  }
  CHECK(agreed > 100);
  // A rank's own: its threads, timeout and progress mode, its metrics file and progress lines, the
  // batch size it checks, its offload paths and pinning, its aio tuning, rank 0's monitors.
  const std::set<std::string> expected_own = {
      "train.threads", "train.metrics", "train.comm_timeout_s", "train.comm_progress", "train_batch_size", "steps_per_print",
      "zero_optimization.offload_optimizer.nvme_path", "zero_optimization.offload_optimizer.pin_memory",
      "zero_optimization.offload_param.nvme_path", "zero_optimization.offload_param.pin_memory", "aio.block_size",
      "aio.queue_depth", "aio.intra_op_parallelism", "aio.single_submit", "aio.overlap_events", "tensorboard.enabled",
      "tensorboard.output_path", "tensorboard.job_name", "csv_monitor.enabled", "csv_monitor.output_path",
      "csv_monitor.job_name"};
  CHECK(own == expected_own);
  for (const char* key : {"data.tokenizer", "data.chat_template", "data.packing", "data.system", "train.attention"}) {
    CAPTURE(key);
    CHECK_FALSE(zt::find_key(key)->per_rank);
  }
}

TEST_CASE("a rank's own settings change nothing the ranks agree on") {
  const Settings base = settings_with({});
  for (const std::string set :
       {"train.threads=3", "train.comm_timeout_s=5", "train.comm_progress=poll", "train.metrics=m.jsonl",
        "steps_per_print=1", "aio.block_size=4096", "train_batch_size=4"}) {
    CAPTURE(set);
    CHECK(changed(base, settings_with({set})).empty());
  }
  // Offload's paths and pinning are the host's; where states live is not.
  const Settings nvme = settings_with({"zero_optimization.stage=3", "zero_optimization.offload_optimizer.device=nvme",
                                       "zero_optimization.offload_optimizer.nvme_path=/a"});
  CHECK(changed(nvme, settings_with({"zero_optimization.stage=3", "zero_optimization.offload_optimizer.device=nvme",
                                     "zero_optimization.offload_optimizer.nvme_path=/b",
                                     "zero_optimization.offload_optimizer.pin_memory=true"}))
            .empty());
  CHECK(changed(nvme, settings_with({"zero_optimization.stage=3", "zero_optimization.offload_optimizer.device=cpu"})) ==
        std::vector<std::string>{"zero_optimization.offload_optimizer.device"});
}

TEST_CASE("one rank agrees with itself without a collective") {
  auto self = zt::make_self_communicator();
  json j = {{"data", {{"train", "x"}}}};
  CHECK_NOTHROW(zt::agree_on_settings(zt::parse_config(j), *self));
}
