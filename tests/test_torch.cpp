// The whole tiny GPT-2 against PyTorch: loss and every parameter gradient, then ten AdamW steps
// through the real trainer. The reference (tests/ref/gpt2_torch.py) runs at test time on the same
// weights and tokens, in float64.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "models/gpt2.hpp"
#include "models/llmc_format.hpp"
#include "runtime/data/data.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/model_fixture.hpp"
#include "tests/test_util.hpp"

using namespace zt;

namespace {

const GPT2Dims kDims = gpt2_dims(/*maxT*/ 32, /*V*/ 60, /*Vp*/ 64, /*L*/ 2, /*NH*/ 2, /*C*/ 32);
constexpr int B = 2, T = 16;



// Runs the reference; returns loss0, the gradients in llm.c order, then one loss per step.
std::vector<float> torch_reference(const test::TempDir& dir, const std::string& ckpt, const std::string& tokens, int steps) {
  const char* py = std::getenv("ZT_PYTHON");
  const char* ref = std::getenv("ZT_TORCH_REF");
  REQUIRE_MESSAGE((py && ref), "ZT_PYTHON and ZT_TORCH_REF must be set (meson test sets them)");
  const std::string out = dir / "torch.out";
  const test::Run r = test::run(std::string(py) + " " + ref + " " + ckpt + " " + tokens + " " + out + " --steps " +
                                std::to_string(steps) + " --lr 1e-3 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1");
  REQUIRE_MESSAGE(r.status == 0, "PyTorch reference failed (is python3-torch installed? scripts/install-deps.sh "
                                 "installs it):\n" << r.output);
  return test::read_floats(out);
}

// A freshly initialised model, saved where the reference reads it.
std::string save_initial_model(const test::TempDir& dir, uint64_t seed) {
  test::BoundGPT2 m(kDims);
  m.gpt.init(seed);
  const std::string path = dir / "model.bin";
  save_llmc_checkpoint(path, m.gpt);
  return path;
}

}  // namespace

TEST_CASE("tiny GPT-2: loss and every parameter gradient match PyTorch") {
  test::TempDir dir;
  const std::string ckpt = save_initial_model(dir, 7);
  test::BoundGPT2 m(kDims, true);
  load_llmc_checkpoint(ckpt, m.gpt);

  std::mt19937 gen(3);
  std::vector<int32_t> in(B * T), tg(B * T);
  for (auto& t : in) t = static_cast<int32_t>(gen() % kDims.vocab_size);
  for (auto& t : tg) t = static_cast<int32_t>(gen() % kDims.vocab_size);
  tg[5] = tg[T + 9] = -1;  // ignored positions
  const std::string tokens = dir / "tokens.bin";
  test::write_token_batch(tokens, B, T, in, tg);
  const std::vector<float> ref = torch_reference(dir, ckpt, tokens, 0);
  REQUIRE(ref.size() == 1 + static_cast<size_t>(gpt2_num_params(kDims)));

  Tensor inputs = Tensor::empty({B, T}, DType::i32), targets = Tensor::empty({B, T}, DType::i32);
  std::copy(in.begin(), in.end(), inputs.data<int32_t>());
  std::copy(tg.begin(), tg.end(), targets.data<int32_t>());
  Tape tape;
  const Tensor loss = m.gpt.forward(tape, inputs, targets);
  const float loss0 = loss.data<float>()[0];
  tape.backward(loss);
  CHECK(std::abs(loss0 - ref[0]) <= 1e-4 * std::abs(ref[0]));

  size_t at = 1;
  m.gpt.for_each_param_in_file_order([&](int u, int i) {
    const Tensor& g = m.gpt.param(u, i).grad();
    const size_t n = static_cast<size_t>(g.numel());
    const ParamSpec& spec = m.gpt.layout()[u].params[i];
    CAPTURE(spec.name);
    CAPTURE(spec.layer);
    CHECK(test::rel_error(g.data<float>(), ref.data() + at, n) <= 1e-4);
    at += n;
  });
  CHECK(at == ref.size());
}

TEST_CASE("ten AdamW steps through the trainer match torch.optim.AdamW") {
  test::TempDir dir;
  const std::string ckpt = save_initial_model(dir, 11);

  // A shard of exactly one batch: the loader wraps to it every step, as the reference reuses it.
  std::mt19937 gen(5);
  std::vector<uint16_t> shard(B * T + 1);
  for (auto& t : shard) t = static_cast<uint16_t>(gen() % kDims.vocab_size);
  write_llmc_shard(dir / "train_000.bin", shard);
  std::vector<int32_t> in(shard.begin(), shard.end() - 1), tg(shard.begin() + 1, shard.end());
  const std::string tokens = dir / "tokens.bin";
  test::write_token_batch(tokens, B, T, in, tg);
  const int steps = 10;
  const std::vector<float> ref = torch_reference(dir, ckpt, tokens, steps);
  REQUIRE(ref.size() == 1 + static_cast<size_t>(gpt2_num_params(kDims)) + steps);

  nlohmann::json cfg = {
      {"model", {{"init_from", ckpt}}},
      {"data", {{"format", "llmc"}, {"train", dir / "train_*.bin"}, {"seq_len", T}}},
      {"train", {{"steps", steps}, {"val_interval", 0}}},
      {"train_micro_batch_size_per_gpu", B},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-3}, {"betas", {0.9, 0.95}}, {"eps", 1e-8}, {"weight_decay", 0.1}}}}}};
  Trainer trainer(parse_config(cfg));
  for (int s = 0; s < steps; ++s) {
    const double want = ref[ref.size() - steps + s];
    CAPTURE(s);
    CHECK(std::abs(trainer.step().loss - want) <= 1e-4 * std::abs(want));
  }
}
