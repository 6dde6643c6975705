// A training step of a GPT-2 or Llama shape on this machine, through the real trainer (data loader,
// forward, backward, norm, AdamW), with the machine's SGEMM rate measured in the same run as the
// yardstick and a per-op time breakdown. Prints a table, then one JSON line.
//
//   step_gpt2 [--layers 12 --heads 12 --channels 768 --vocab 50257 --padded-vocab 50304
//              --batch 4 --seq 256 --steps 5 --warmup 1 --threads 0 --sgemm 2048]
//             [--llama 1 --kv-heads 3 --ffn 1536 --tied 1]   (a Llama-family shape: SmolLM2-135M's is
//              --llama 1 --layers 30 --heads 9 --kv-heads 3 --channels 576 --ffn 1536 --vocab 49152
//              --padded-vocab 49152)
//             [--lora R]   (LoRA of rank R on every linear layer of the blocks, the model frozen)
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <unistd.h>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/kernels.hpp"
#include "runtime/train/trainer.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// GFLOP/s of an n×n×n SGEMM through the build's own GEMM (kernels/cpu/gemm.hpp, the library
// -Dblas chose, threaded as the step threads it), best of a few; bench/sgemm.cpp times the others.
double sgemm_gflops(int n) {
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  double best = 0;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    zt::cpu::sgemm(false, false, n, n, n, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i) best = std::max(best, 2.0 * n * n * static_cast<double>(n) / s / 1e9);  // first call warms up
  }
  if (c(0, 0) == 12345.0f) std::printf(" ");  // keep the product alive
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, long> a = {{"layers", 12}, {"heads", 12}, {"channels", 768}, {"vocab", 50257},
                                   {"padded-vocab", 50304}, {"batch", 4}, {"seq", 256}, {"steps", 5},
                                   {"warmup", 1}, {"threads", 0}, {"sgemm", 2048}, {"llama", 0}, {"lora", 0},
                                   {"kv-heads", 0}, {"ffn", 0}, {"tied", 1}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = std::string(argv[i]).substr(2);
    if (!a.count(k)) {
      std::fprintf(stderr, "step_gpt2: unknown flag %s\n", argv[i]);
      return 2;
    }
    a[k] = std::atol(argv[i + 1]);
  }
  zt::cpu::set_num_threads(static_cast<int>(a["threads"]));

  // Random tokens in an llm.c shard, so the step runs exactly as `ztrain train` runs it.
  const auto dir = std::filesystem::temp_directory_path() / ("ztrain_bench_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::mt19937 gen(1);
  std::vector<uint16_t> tokens(static_cast<size_t>(a["batch"] * a["seq"] * 4 + 1));
  for (auto& t : tokens) t = static_cast<uint16_t>(gen() % a["vocab"]);
  zt::write_llmc_shard((dir / "train_000.bin").string(), tokens);

  nlohmann::json cfg = {
      {"model", {{"n_layer", a["layers"]}, {"n_head", a["heads"]}, {"n_embd", a["channels"]}, {"vocab_size", a["vocab"]},
                 {"padded_vocab_size", a["padded-vocab"]}, {"max_seq_len", std::max(a["seq"], 1024L)}}},
      {"data", {{"format", "llmc"}, {"train", (dir / "train_*.bin").string()}, {"seq_len", a["seq"]}}},
      {"train", {{"steps", a["steps"] + a["warmup"]}, {"threads", a["threads"]}, {"val_interval", 0}}},
      {"train_micro_batch_size_per_gpu", a["batch"]},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-4}, {"betas", {0.9, 0.95}}, {"weight_decay", 0.1}}}}}};
  if (a["llama"]) {
    nlohmann::json& m = cfg["model"];
    m["arch"] = "llama";
    m["n_kv_head"] = a["kv-heads"] ? a["kv-heads"] : a["heads"];
    m["intermediate_size"] = a["ffn"] ? a["ffn"] : 4 * a["channels"];
    m["tie_word_embeddings"] = a["tied"] != 0;
  }
  if (a["lora"]) cfg["lora"] = {{"r", a["lora"]}, {"alpha", 2 * a["lora"]}, {"target_modules", "all-linear"}};
  zt::Trainer trainer(zt::parse_config(cfg));
  const double sgemm = sgemm_gflops(static_cast<int>(a["sgemm"]));

  std::vector<double> ms;
  zt::StepStats last;
  for (long s = 0; s < a["warmup"] + a["steps"]; ++s) {
    if (s == a["warmup"]) trainer.profile().clear();
    last = trainer.step();
    if (s >= a["warmup"]) ms.push_back(last.ms);
  }
  std::filesystem::remove_all(dir);

  const double tokens_per_step = static_cast<double>(a["batch"] * a["seq"]);
  const double step_ms = median(ms);
  const double gflops = trainer.model().flops_per_token(static_cast<int>(a["seq"])) * tokens_per_step / (step_ms / 1e3) / 1e9;
  const double steps = static_cast<double>(ms.size());

  std::printf("%-14s %10s %10s %8s\n", "op", "fwd ms", "bwd ms", "share");
  double total = 0;
  for (const auto& [op, r] : trainer.profile().rows()) total += r.forward_s + r.backward_s;
  for (const auto& [op, r] : trainer.profile().rows())
    std::printf("%-14s %10.1f %10.1f %7.1f%%\n", op.c_str(), r.forward_s / steps * 1e3, r.backward_s / steps * 1e3,
                100.0 * (r.forward_s + r.backward_s) / total);
  std::printf("step %.1f ms (ops %.1f ms), %.0f tokens/s, %.1f GFLOP/s = %.0f%% of %s SGEMM %.1f GFLOP/s (%ld^3), peak %.0f MiB\n",
              step_ms, total / steps * 1e3, tokens_per_step / (step_ms / 1e3), gflops, 100 * gflops / sgemm,
              zt::cpu::gemm_library(), sgemm, a["sgemm"], static_cast<double>(last.mem.total_peak) / (1 << 20));
  nlohmann::json out = {{"impl", "ztrain"}, {"arch", trainer.model().arch()}, {"threads", zt::cpu::num_threads()}, {"B", a["batch"]}, {"T", a["seq"]},
                        {"params", trainer.model().num_params()}, {"ms_per_step", step_ms},
                        {"tokens_per_s", tokens_per_step / (step_ms / 1e3)}, {"gflops", gflops},
                        {"sgemm_gflops", sgemm}, {"gemm_library", zt::cpu::gemm_library()},
                        {"peak_bytes", last.mem.total_peak}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
