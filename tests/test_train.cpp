// Training end to end through the Trainer: a tiny model learns real text, metrics are written,
// the saved model reloads, and the step's bookkeeping holds.
#include <doctest/doctest.h>

#include <fstream>

#include "runtime/plan/estimate.hpp"
#include "runtime/train/memory_floor.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/test_util.hpp"

using namespace zt;

namespace {
nlohmann::json tiny_text_config(const test::TempDir& dir, int steps) {
  return {{"model", {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 64}, {"max_seq_len", 64}}},
          {"data", {{"format", "bytes"}, {"train", "/usr/share/common-licenses"}, {"seq_len", 64}}},
          {"train", {{"steps", steps}, {"seed", 5}, {"val_interval", steps}, {"val_batches", 8},
                     {"metrics", dir / "metrics.jsonl"}, {"save_model", dir / "model.bin"}}},
          {"train_micro_batch_size_per_gpu", 8},
          {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-3}, {"betas", {0.9, 0.95}}, {"weight_decay", 0.1}}}}},
          {"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_max_lr", 3e-3}, {"warmup_num_steps", 10}, {"warmup_type", "linear"}}}}},
          {"gradient_clipping", 1.0},
          {"steps_per_print", 20}};
}
}  // namespace

TEST_CASE("a tiny GPT-2 learns the licenses text: validation loss drops clearly") {
  REQUIRE_MESSAGE(std::filesystem::exists("/usr/share/common-licenses"), "Debian's /usr/share/common-licenses is the test corpus");
  test::TempDir dir;
  const int steps = 80;
  Trainer t(parse_config(tiny_text_config(dir, steps)));
  REQUIRE(t.has_validation());
  const double before = t.validate();
  CHECK(before == doctest::Approx(std::log(256.0)).epsilon(0.05));  // an untrained model is near uniform
  std::vector<std::string> lines;
  t.run([&](const std::string& l) { lines.push_back(l); });
  const double after = t.validate();
  MESSAGE("val loss " << before << " -> " << after);
  CHECK(after < before - 1.5);  // from uniform (5.55) to about 3.6 here: it has learned letter statistics and more

  // One metrics line per step (plus validations), with the promised fields.
  std::ifstream m(dir / "metrics.jsonl");
  int step_lines = 0, val_lines = 0;
  for (std::string line; std::getline(m, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) {
      ++val_lines;
      continue;
    }
    ++step_lines;
    for (const char* k : {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s", "tflops"}) CHECK(j.contains(k));
    CHECK(j["peak_bytes"]["parameters"].get<size_t>() > 0);
    CHECK(j["peak_bytes"]["activations"].get<size_t>() > 0);
    CHECK(j["step"].get<int>() == step_lines);
  }
  CHECK(step_lines == steps);
  CHECK(val_lines == 1);
  CHECK(lines.size() >= 5);

  // The saved model reloads to the same validation loss.
  nlohmann::json again = tiny_text_config(dir, 1);
  again["model"] = {{"init_from", dir / "model.bin"}};
  again["train"].erase("save_model");
  again["train"].erase("metrics");
  Trainer reloaded(parse_config(again));
  CHECK(reloaded.validate() == doctest::Approx(after).epsilon(1e-6));
}

TEST_CASE("gradient accumulation: 1 x B equals 4 x B/4 on the same tokens") {
  test::TempDir dir;
  auto run = [&](int micro, int accum) {
    nlohmann::json c = tiny_text_config(dir, 3);
    c["train"] = {{"steps", 3}, {"seed", 5}, {"val_interval", 0}};
    c["train_micro_batch_size_per_gpu"] = micro;
    c["gradient_accumulation_steps"] = accum;
    Trainer t(parse_config(c));
    std::vector<double> losses;
    for (int s = 0; s < 3; ++s) losses.push_back(t.step().loss);
    return losses;
  };
  const auto whole = run(8, 1), split = run(2, 4);
  for (int s = 0; s < 3; ++s) CHECK(split[s] == doctest::Approx(whole[s]).epsilon(1e-5));
}

TEST_CASE("the trainer rejects a batch-size mismatch naming all four numbers") {
  test::TempDir dir;
  nlohmann::json c = tiny_text_config(dir, 1);
  c["train_batch_size"] = 32;
  c["gradient_accumulation_steps"] = 2;
  CHECK_THROWS_WITH(Trainer(parse_config(c)),
                    "config: train_batch_size: 32 != train_micro_batch_size_per_gpu 8 * gradient_accumulation_steps 2 * "
                    "world size 1 = 16");
}

TEST_CASE("a model no host can hold is refused from the memory floor before anything is allocated") {
  test::TempDir dir;
  nlohmann::json c = tiny_text_config(dir, 1);
  c["model"]["n_embd"] = 2000000;  // 48 trillion parameters
  CHECK_THROWS_WITH_AS(Trainer(parse_config(c)), doctest::Contains("config: model: does not fit in this host's memory: 9.6e+13 parameters need at least"),
                       ConfigError);
}

TEST_CASE("the memory floor lies under the estimate at every stage, precision, offload and world size") {
  test::TempDir dir;
  for (const char* precision : {"f32", "bf16"})
    for (const char* offload : {"none", "cpu", "nvme"})
      for (int world : {1, 2, 5})
        for (int stage = 0; stage <= 3; ++stage) {
          if (stage == 0 && std::string(offload) != "none") continue;
          CAPTURE(precision);
          CAPTURE(offload);
          CAPTURE(world);
          CAPTURE(stage);
          nlohmann::json j = tiny_text_config(dir, 1);
          j["zero_optimization"] = {{"stage", stage}};
          if (std::string(precision) == "bf16") j["bf16"] = {{"enabled", true}};
          if (std::string(offload) != "none") {
            j["zero_optimization"]["offload_optimizer"] = {{"device", offload}, {"nvme_path", dir.path.string()}};
            if (stage == 3) j["zero_optimization"]["offload_param"] = {{"device", offload}, {"nvme_path", dir.path.string()}};
          }
          const Config cfg = parse_config(j);
          const MemoryEstimate e = estimate_memory(cfg, world);
          const double floor = model_states_floor(cfg.zero, static_cast<double>(e.num_params), world, world);
          CHECK(floor > 0);
          CHECK(floor <= static_cast<double>(e.stages[size_t(stage)].total));
        }
}
