// GPT-2 training steps on one GPU through the runtime itself: the Trainer with train.device cuda
// (bf16, one rank, ZeRO stage 0), so the model's own forward and backward on the CUDA backend, the
// ZeRO engine's gradient norm and fused AdamW, exactly as `ztrain train` runs them.
//
// On a fixed batch of random tokens (B=16, T=1024: an llm.c shard that holds one batch, which the
// loader reads again every step) it prints the loss of 10 steps (it must fall and never be NaN),
// then times 20 more: ms/step, tokens/s and MFU by llm.c's formula, FLOPs per token = 6 N + 6 L C T
// (Model::flops_per_token; N the parameter count, padded vocabulary included), against the bf16
// GEMM ceiling measured in the same process. Shapes 124M and 350M. Exits 77 without a device;
// needs NCCL, as train.device cuda does. Driver: bench/gpu_check.sh.
//
// Legend: B batch, T sequence, C channels, NH heads, L layers, V vocabulary, Vp padded vocabulary.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu_common.hpp"
#include "runtime/data/data.hpp"
#include "runtime/train/trainer.hpp"

namespace {

using namespace zt::bench;
namespace fs = std::filesystem;

constexpr int B = 16, T = 1024, V = 50257, Vp = 50304;
constexpr int kLossSteps = 10, kTimedSteps = 20;

struct Shape {
  const char* name;
  int L, C, NH;
};

// A shard of one batch (B*T + 1 random tokens in [0, V)) in `dir`; returns its path.
std::string one_batch_shard(const fs::path& dir) {
  std::mt19937 rng(42);
  std::vector<uint16_t> tokens(static_cast<size_t>(B) * T + 1);
  for (auto& t : tokens) t = static_cast<uint16_t>(rng() % V);
  const std::string path = (dir / "train_000.bin").string();
  zt::write_llmc_shard(path, tokens);
  return path;
}

nlohmann::json config(const Shape& d, const std::string& shard) {
  return {{"model", {{"n_layer", d.L}, {"n_head", d.NH}, {"n_embd", d.C}, {"max_seq_len", T}, {"vocab_size", V},
                     {"padded_vocab_size", Vp}}},
          {"data", {{"format", "llmc"}, {"train", shard}, {"seq_len", T}}},
          {"train", {{"steps", kLossSteps + kTimedSteps}, {"seed", 5}, {"val_interval", 0}, {"device", "cuda"}}},
          {"zero_optimization", {{"stage", 0}}},
          {"train_micro_batch_size_per_gpu", B},
          {"optimizer",
           {{"type", "AdamW"}, {"params", {{"lr", 1e-3}, {"betas", {0.9, 0.95}}, {"weight_decay", 0.1}}}}}};
}

// Returns false where a loss is NaN or the loss did not fall.
bool run(const Shape& d, const std::string& shard, double gemm_tflops) {
  zt::Trainer trainer(zt::parse_config(config(d, shard)));
  const zt::Model& model = trainer.model();
  bool ok = true;
  double first = 0, last = 0;
  for (int t = 1; t <= kLossSteps; ++t) {  // the loss is the forward's, before this step's update
    const zt::StepStats s = trainer.step();
    if (t == 1) {
      first = s.loss;
      std::printf("# %s: L=%d C=%d NH=%d, %.1fM parameters, %.2f GiB of device memory (the step's peak)\n", d.name,
                  d.L, d.C, d.NH, static_cast<double>(model.num_params()) / 1e6,
                  static_cast<double>(s.mem.total_peak) / (1 << 30));
    }
    last = s.loss;
    std::printf("%s step %2d loss %.4f\n", d.name, t, last);
    if (!std::isfinite(last)) ok = false;
  }
  if (!(last < first)) ok = false;
  // Each step waits for its loss and norm, and the last one's update is waited for here.
  const auto start = std::chrono::steady_clock::now();
  double loss_after = 0;
  for (int t = 0; t < kTimedSteps; ++t) loss_after = trainer.step().loss;
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kTimedSteps;
  if (!std::isfinite(loss_after)) ok = false;
  const double tokens = static_cast<double>(B) * T;
  const double tflops = model.flops_per_token(T) * tokens / step_s * 1e-12;
  std::printf("RESULT %s ms/step %.2f tokens/s %.0f TFLOP/s %.1f MFU %.1f%% loss %.4f -> %.4f (%s)\n", d.name,
              step_s * 1e3, tokens / step_s, tflops, 100.0 * tflops / gemm_tflops, first, loss_after,
              ok ? "ok" : "LOSS CHECK FAILED");
  return ok;
}

}  // namespace

int main() {
  const fs::path dir = fs::temp_directory_path() / ("ztrain_gpu_step_" + std::to_string(getpid()));
  int rc = 1;
  try {
    require_device("gpu_step");
    cudaStream_t s = nullptr;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    const double gemm = gemm_ceiling_tflops(s);
    check(cudaStreamDestroy(s), "cudaStreamDestroy");
    std::printf("# GEMM ceiling (bf16 8192^3): %.0f TFLOP/s; B=%d T=%d\n", gemm, B, T);
    fs::create_directories(dir);
    const std::string shard = one_batch_shard(dir);
    bool ok = run({"124M", 12, 768, 12}, shard, gemm);
    ok = run({"350M", 24, 1024, 16}, shard, gemm) && ok;
    rc = ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_step: %s\n", e.what());
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return rc;
}
