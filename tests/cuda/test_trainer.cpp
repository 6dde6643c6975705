// The Trainer with train.device "cuda" (one rank: NCCL over the Self communicator): in f32 its
// losses follow the same run on the CPU; in bf16 (the default there, computing in bf16 per
// [Note: compute in 16 bits]) the ZeRO stages agree and the model learns; GPT-2, and a tiny Llama
// with grouped-query heads.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/train/trainer.hpp"
#include "tests/test_util.hpp"

using namespace zt;

namespace {

// A corpus written here (the device machine may lack Debian's licenses folder): sentences from a
// small vocabulary in a fixed pseudo-random order, which a small model learns within steps.
std::string corpus() {
  const char* words[] = {"the", "rank", "gathers", "a", "unit", "and", "reduces", "its", "gradients", "shard",
                         "of", "parameters", "on", "device", "memory", "while", "compute", "overlaps"};
  std::string text;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 40000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    text += words[x % std::size(words)];
    text += i % 11 == 10 ? ".\n" : " ";
  }
  return text;
}

nlohmann::json config(const test::TempDir& dir, const std::string& device, int stage) {
  return {{"model", {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 64}, {"max_seq_len", 64}}},
          {"data", {{"format", "bytes"}, {"train", dir.write("corpus.txt", corpus())}, {"seq_len", 64}}},
          {"train", {{"steps", 100}, {"seed", 5}, {"val_interval", 0}, {"device", device}}},
          {"zero_optimization", {{"stage", stage}}},
          {"train_micro_batch_size_per_gpu", 8},
          {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-3}, {"weight_decay", 0.1}}}}},
          {"gradient_clipping", 1.0}};
}

// A tiny Llama on the same data: grouped-query heads (4 query heads over 2 kv heads, hs 16),
// SwiGLU, RMSNorm, RoPE with Llama 3.1's scaling, an untied head; every GEMM dimension a multiple
// of 8 (bf16 cuBLASLt).
nlohmann::json llama_config(const test::TempDir& dir, const std::string& device, int stage) {
  nlohmann::json c = config(dir, device, stage);
  c["model"] = {{"arch", "llama"},
                {"n_layer", 2},
                {"n_head", 4},
                {"n_kv_head", 2},
                {"n_embd", 64},
                {"intermediate_size", 128},
                {"tie_word_embeddings", false},
                {"max_seq_len", 64},
                {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8}, {"original_max_position_embeddings", 16}}}};
  return c;
}

std::vector<double> losses(const nlohmann::json& c, int steps) {
  Trainer t(parse_config(c));
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) out.push_back(t.step().loss);
  return out;
}

}  // namespace

TEST_CASE("trainer on cuda, f32: the losses follow the cpu run") {
  test::TempDir dir;
  nlohmann::json gpu = config(dir, "cuda", 3), cpu = config(dir, "cpu", 3);
  for (nlohmann::json* c : {&gpu, &cpu}) (*c)["bf16"] = {{"enabled", false}};
  const auto g = losses(gpu, 5), c = losses(cpu, 5);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("step " << i + 1 << ": " << g[i] << " on cuda, " << c[i] << " on the cpu");
    CHECK(std::isfinite(g[i]));
    // Different kernels (cuBLASLt, the tiled attention) round differently, and AdamW's normalised
    // step magnifies differences in gradients near zero: close, not equal.
    CHECK(std::abs(g[i] - c[i]) <= 1e-3 * std::abs(c[i]));
  }
}

TEST_CASE("trainer on cuda, bf16: stages 0-3 agree, and it learns") {
  test::TempDir dir;
  const auto s0 = losses(config(dir, "cuda", 0), 30);
  for (int stage = 1; stage <= 3; ++stage) {
    const auto s = losses(config(dir, "cuda", stage), 30);
    for (size_t i = 0; i < s.size(); ++i) {
      INFO("stage " << stage << " step " << i + 1 << ": " << s[i] << ", stage 0: " << s0[i]);
      CHECK(std::abs(s[i] - s0[i]) <= 1e-5 * std::abs(s0[i]));
    }
  }
  MESSAGE("bf16 on cuda: loss " << s0.front() << " -> " << s0.back());
  CHECK(s0.front() == doctest::Approx(std::log(256.0)).epsilon(0.05));
  CHECK(s0.back() < s0.front() - 1.5);
}

TEST_CASE("trainer on cuda, llama with grouped-query heads: f32 follows the cpu, bf16 stages agree and learn") {
  test::TempDir dir;
  nlohmann::json gpu = llama_config(dir, "cuda", 3), cpu = llama_config(dir, "cpu", 3);
  for (nlohmann::json* c : {&gpu, &cpu}) (*c)["bf16"] = {{"enabled", false}};
  const auto g = losses(gpu, 5), c = losses(cpu, 5);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("step " << i + 1 << ": " << g[i] << " on cuda, " << c[i] << " on the cpu");
    CHECK(std::abs(g[i] - c[i]) <= 1e-3 * std::abs(c[i]));
  }
  const auto s0 = losses(llama_config(dir, "cuda", 0), 30), s3 = losses(llama_config(dir, "cuda", 3), 30);
  for (size_t i = 0; i < s3.size(); ++i) {
    INFO("stage 3 step " << i + 1 << ": " << s3[i] << ", stage 0: " << s0[i]);
    CHECK(std::abs(s3[i] - s0[i]) <= 1e-5 * std::abs(s0[i]));
  }
  MESSAGE("llama, bf16 on cuda: loss " << s0.front() << " -> " << s0.back());
  CHECK(s0.back() < s0.front() - 1.5);
}

TEST_CASE("trainer on cuda, bf16: cuDNN's fused attention follows our kernels (train.attention \"cudnn\")") {
  // Both compute in bf16 with f32 statistics but round P and dS at different points: close, not
  // equal; and a run repeats bit for bit (cuDNN's deterministic backward).
  test::TempDir dir;
  for (const bool llama : {false, true}) {
    nlohmann::json ours = llama ? llama_config(dir, "cuda", 3) : config(dir, "cuda", 3);
    nlohmann::json theirs = ours;
    theirs["train"]["attention"] = "cudnn";
    const auto a = losses(ours, 20), b = losses(theirs, 20);
    for (size_t i = 0; i < a.size(); ++i) {
      INFO((llama ? "llama" : "gpt2") << " step " << i + 1 << ": " << b[i] << " through cudnn, " << a[i] << " ours");
      CHECK(std::abs(a[i] - b[i]) <= 2e-2 * std::abs(a[i]));
    }
    CHECK(losses(theirs, 5) == std::vector<double>(b.begin(), b.begin() + 5));
  }
}

TEST_CASE("trainer on cuda, bf16: optimizer offload to host memory follows the run without it") {
  // [Note: offload from a device]: AdamW then runs on the host (the CPU kernel) over gradients
  // brought down from the GPU, so the numbers are the CPU AdamW's instead of the CUDA one's:
  // close, not identical.
  test::TempDir dir;
  nlohmann::json off = config(dir, "cuda", 2);
  off["zero_optimization"]["offload_optimizer"] = {{"device", "cpu"}};
  const auto with = losses(off, 10), without = losses(config(dir, "cuda", 2), 10);
  for (size_t i = 0; i < with.size(); ++i) {
    INFO("step " << i + 1 << ": " << with[i] << " offloaded, " << without[i] << " on the GPU");
    CHECK(std::abs(with[i] - without[i]) <= 1e-2 * std::abs(without[i]));
  }
  // In fp32 the master is the device's parameters: refused by name.
  off["bf16"] = {{"enabled", false}};
  CHECK_THROWS_WITH(losses(off, 1), doctest::Contains("needs bf16 or fp16"));
}

TEST_CASE("trainer on cuda, bf16: parameter offload changes no number") {
  // The shards move through host memory and back; AdamW still runs on the GPU.
  test::TempDir dir;
  nlohmann::json off = config(dir, "cuda", 3);
  off["zero_optimization"]["offload_param"] = {{"device", "cpu"}};
  off["zero_optimization"]["stage3_param_persistence_threshold"] = 0;  // every unit offloaded
  nlohmann::json plain = config(dir, "cuda", 3);
  plain["zero_optimization"]["stage3_param_persistence_threshold"] = 0;
  CHECK(losses(off, 8) == losses(plain, 8));
  // Both offloads at once: the optimizer's update writes the host shard directly.
  off["zero_optimization"]["offload_optimizer"] = {{"device", "cpu"}};
  const auto both = losses(off, 8), plain_losses = losses(plain, 8);
  for (size_t i = 0; i < both.size(); ++i) CHECK(std::abs(both[i] - plain_losses[i]) <= 1e-2 * plain_losses[i]);
  off["bf16"] = {{"enabled", false}};
  off["zero_optimization"].erase("offload_optimizer");
  CHECK_THROWS_WITH(losses(off, 1), doctest::Contains("offload_param with units on cuda needs bf16 or fp16"));
}

TEST_CASE("trainer on cuda, fp16: f32 compute over an f16 wire with dynamic loss scaling learns") {
  // The CUDA kernels compute in f32 and bf16, so fp16 widens as on the CPU ([Note: mixed
  // precision]) and the loss scaler works as there.
  test::TempDir dir;
  nlohmann::json c = config(dir, "cuda", 3);
  c["fp16"] = {{"enabled", true}, {"initial_scale_power", 12}};
  Trainer t(parse_config(c));
  std::vector<double> l;
  for (int s = 0; s < 30; ++s) {
    const StepStats st = t.step();
    CHECK(st.loss_scale > 0);
    if (!st.skipped) l.push_back(st.loss);
  }
  REQUIRE(l.size() >= 20);
  CHECK(l.back() < l.front() - 1.5);
}
