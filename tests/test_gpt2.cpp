// GPT-2 layout, initialisation, llm.c checkpoint files, and sampling.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "models/gpt2.hpp"
#include "models/llmc_format.hpp"
#include "models/registry.hpp"
#include "runtime/config.hpp"
#include "runtime/cli/sample.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/model_fixture.hpp"
#include "tests/test_util.hpp"

using namespace zt;

namespace {
const GPT2Dims kTiny = gpt2_dims(/*maxT*/ 16, /*V*/ 50, /*Vp*/ 64, /*L*/ 3, /*NH*/ 2, /*C*/ 8);

using Bound = test::BoundGPT2;

double stddev(const float* x, size_t n) {
  double s = 0, s2 = 0;
  for (size_t i = 0; i < n; ++i) s += x[i], s2 += static_cast<double>(x[i]) * x[i];
  return std::sqrt(s2 / n - (s / n) * (s / n));
}

void patch_int(const std::string& path, long offset, int32_t v) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(reinterpret_cast<const char*>(&v), 4);
}
}  // namespace

TEST_CASE("layout: llm.c's parameter count and per-unit order") {
  CHECK(gpt2_num_params(GPT2Dims{}) == 124475904);  // llm.c's GPT-2 124M with Vp = 50304
  const auto units = gpt2_layout(kTiny);
  REQUIRE(units.size() == 5);
  CHECK(units[0].params[0].name == "wte");
  CHECK(units[1].params[2].name == "qkvw");
  CHECK(units[1].params[2].shape == Shape{24, 8});
  CHECK(units[2].params[10].name == "fcprojw");
  CHECK(units[2].params[10].shape == Shape{8, 32});
  CHECK(units[4].params[1].name == "lnfb");
  for (const UnitLayout& u : units) {
    int64_t at = 0;
    for (const ParamSpec& p : u.params) {
      CHECK(p.offset == at);  // contiguous, in order, no gaps
      at += shape_numel(p.shape);
      CHECK(p.decay == (p.shape.size() == 2));
    }
    CHECK(u.numel == at);
  }
}

TEST_CASE("layout: the tied embedding's units") {
  const GPT2Dims gpt2;  // 124M: 6 units of 8384 rows, none larger than a block's 7087872 parameters
  CHECK(gpt2_wte_units(gpt2) == 6);
  const auto units = gpt2_layout(gpt2);
  REQUIRE(units.size() == 6 + 12 + 1);
  CHECK(units[0].name == "embedding");
  CHECK(units[0].params[0].shape == Shape{8384, 768});
  CHECK(units[0].params[1].name == "wpe");
  CHECK(units[5].name == "wte5");
  CHECK(units[5].params[0].row0 == 5 * 8384);
  CHECK(units[5].params[0].tensor == 0);
  CHECK(units[6].name == "block0");
  CHECK(units[6].params[0].tensor == 2);
  int64_t n = 0;
  for (const UnitLayout& u : units) {
    CHECK(u.numel <= units[6].numel + 1024 * 768);  // unit 0 also holds wpe
    n += u.numel;
  }
  CHECK(n == gpt2_num_params(gpt2));
  CHECK(gpt2_wte_units(kTiny) == 1);
  CHECK_THROWS_WITH_AS(gpt2_layout(kTiny, 3), doctest::Contains("must be >= 1 and divide padded_vocab_size 64"),
                       std::invalid_argument);
}

TEST_CASE("model: built by arch, each parameter with its Hugging Face name and layout") {
  const std::unique_ptr<Model> m = make_model("gpt2", kTiny, 2);
  CHECK(m->arch() == "gpt2");
  CHECK(m->embedding_units() == 2);
  CHECK(m->block_unit(0) == 2);
  CHECK(m->num_params() == gpt2_num_params(kTiny));
  CHECK(m->flops_per_token(16) == gpt2_flops_per_token(kTiny, 16));
  CHECK(model_num_params_f64("gpt2", kTiny) == static_cast<double>(gpt2_num_params(kTiny)));
  const auto& units = m->layout();
  const ParamSpec& wte1 = units[1].params[0];
  CHECK(wte1.hf_name == "wte.weight");
  CHECK(wte1.row0 == 32);
  CHECK(wte1.hf_rows == 50);  // the padded rows are not in Hugging Face's file
  const ParamSpec& qkvw = units[size_t(m->block_unit(1))].params[2];
  CHECK(qkvw.hf_name == "h.1.attn.c_attn.weight");
  CHECK(qkvw.hf_transposed);  // Conv1D: (in, out)
  CHECK(qkvw.hf_rows == 24);
  CHECK_FALSE(units[size_t(m->block_unit(1))].params[3].hf_transposed);  // its bias
  CHECK(units.back().params[1].hf_name == "ln_f.bias");
  for (const UnitLayout& u : units)
    for (const ParamSpec& p : u.params) {
      CHECK(p.trainable);
      CHECK_FALSE(p.hf_name.empty());
    }
  // Every parameter once in the file order, whole tensors before the next.
  int64_t n = 0;
  m->for_each_param_in_file_order([&](int u, int i) { n += shape_numel(units[size_t(u)].params[size_t(i)].shape); });
  CHECK(n == m->num_params());
  CHECK_THROWS_WITH_AS(make_model("llama2", kTiny), "model arch \"llama2\" is not implemented (expected \"gpt2\", \"llama\", \"qwen3\" or \"gemma3\")",
                       std::invalid_argument);
}

TEST_CASE("the tied embedding in 4 units: the same model, loss and gradients as in one") {
  Bound one(kTiny, true, 1), four(kTiny, true, 4);
  REQUIRE(four.gpt.num_units() == 4 + 3 + 1);
  one.gpt.init(5);
  four.gpt.init(5);
  CHECK(one.llmc_order() == four.llmc_order());  // each row range draws its part of wte's stream
  Tensor tokens = Tensor::empty({2, 16}, DType::i32), targets = Tensor::empty({2, 16}, DType::i32);
  for (int i = 0; i < 32; ++i) {
    tokens.data<int32_t>()[i] = (i * 37) % kTiny.vocab_size;  // every row range sees tokens
    targets.data<int32_t>()[i] = (i * 11 + 3) % kTiny.vocab_size;
  }
  Tape t1, t4;
  const Tensor l1 = one.gpt.forward(t1, tokens, targets), l4 = four.gpt.forward(t4, tokens, targets);
  CHECK(std::abs(l1.data<float>()[0] - l4.data<float>()[0]) <= 1e-6f * std::abs(l1.data<float>()[0]));
  t1.backward(l1);
  t4.backward(l4);
  const std::vector<float> g1 = one.llmc_order(true), g4 = four.llmc_order(true);
  REQUIRE(g1.size() == g4.size());
  CHECK(test::rel_error(g4.data(), g1.data(), g1.size()) <= 1e-5);
  const Tensor lg1 = one.gpt.logits(t1, tokens), lg4 = four.gpt.logits(t4, tokens);
  REQUIRE(lg4.shape() == Shape{2, 16, 64});
  CHECK(test::rel_error(lg4.data<float>(), lg1.data<float>(), static_cast<size_t>(lg1.numel())) <= 1e-6);
}

TEST_CASE("init: GPT-2 statistics, padded rows zero, reproducible") {
  const GPT2Dims d = gpt2_dims(64, 500, 512, 4, 4, 64);
  Bound a(d), b(d);
  a.gpt.init(42);
  b.gpt.init(42);
  CHECK(a.all() == b.all());
  Bound c(d);
  c.gpt.init(43);
  CHECK(a.all() != c.all());
  const Tensor& wte = a.gpt.param(0, 0);
  CHECK(stddev(wte.data<float>(), 500 * 64) == doctest::Approx(0.02).epsilon(0.05));
  for (int64_t i = 500 * 64; i < 512 * 64; ++i) REQUIRE(wte.data<float>()[i] == 0.0f);
  const Tensor& proj = a.gpt.param(1, 4);  // attprojw
  CHECK(stddev(proj.data<float>(), static_cast<size_t>(proj.numel())) == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
  CHECK(a.gpt.param(1, 0).data<float>()[3] == 1.0f);  // ln1w
  CHECK(a.gpt.param(1, 3).data<float>()[3] == 0.0f);  // qkvb
}

TEST_CASE("llm.c checkpoint: round trip is exact, layout on disk is llm.c's") {
  test::TempDir dir;
  Bound a(kTiny);
  a.gpt.init(1);
  const std::string path = dir / "m.bin";
  save_llmc_checkpoint(path, a.gpt);
  CHECK(read_llmc_header(path) == kTiny);
  Bound b(kTiny);
  load_llmc_checkpoint(path, b.gpt);
  CHECK(a.all() == b.all());

  // On disk, after wte and wpe, come all layers' ln1w: layer 1's ln1w starts C floats in.
  const long ln1w_layer1 = 1024 + 4 * (64 * 8 + 16 * 8 + 8);
  a.gpt.param(2, 0).fill(7.5f);
  save_llmc_checkpoint(path, a.gpt);
  std::ifstream f(path, std::ios::binary);
  f.seekg(ln1w_layer1);
  float x = 0;
  f.read(reinterpret_cast<char*>(&x), 4);
  CHECK(x == 7.5f);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("llm.c checkpoint: bad files are named with what is wrong") {
  test::TempDir dir;
  Bound a(kTiny);
  a.gpt.init(1);
  const std::string path = dir / "m.bin";
  save_llmc_checkpoint(path, a.gpt);

  CHECK_THROWS_WITH(read_llmc_header(dir / "missing.bin"), doctest::Contains("missing.bin': cannot open"));
  patch_int(path, 0, 1234);
  CHECK_THROWS_WITH(read_llmc_header(path), doctest::Contains("bad magic number 1234"));
  patch_int(path, 0, 20240326);
  patch_int(path, 4, 5);
  CHECK_THROWS_WITH(read_llmc_header(path), doctest::Contains("unsupported version 5"));
  patch_int(path, 4, 3);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  CHECK_THROWS_WITH(read_llmc_header(path), doctest::Contains("truncated"));
  std::filesystem::resize_file(path, 100);
  CHECK_THROWS_WITH(read_llmc_header(path), doctest::Contains("truncated header"));

  save_llmc_checkpoint(path, a.gpt);
  GPT2Dims other = kTiny;
  other.n_layer = 2;
  Bound b(other);
  CHECK_THROWS_WITH(load_llmc_checkpoint(path, b.gpt), doctest::Contains("holds a model of n_layer 3"));
}

TEST_CASE("init_from: dimensions the config gives must agree with the checkpoint") {
  test::TempDir dir;
  Bound a(kTiny);
  a.gpt.init(1);
  const std::string path = dir / "m.bin";
  save_llmc_checkpoint(path, a.gpt);
  nlohmann::json j = {{"model", {{"init_from", path}, {"n_layer", 3}, {"n_embd", 16}}},
                      {"data", {{"train", "x"}, {"seq_len", 8}}}};
  CHECK_THROWS_WITH(resolve_dims(parse_config(j)),
                    doctest::Contains("config: model.n_embd: 16 disagrees with 8 in the checkpoint"));
  j["model"].erase("n_embd");
  CHECK(resolve_dims(parse_config(j)) == kTiny);  // the rest comes from the header
}

TEST_CASE("sample: greedy decoding follows the argmax and is deterministic") {
  Bound a(kTiny);
  a.gpt.init(3);
  SampleOptions greedy;
  greedy.tokens = 20;  // runs past max_seq_len 16: the context window slides
  greedy.top_k = 1;
  const std::vector<int32_t> out = generate(a.gpt, {1, 2, 3}, greedy);
  REQUIRE(out.size() == 20);
  CHECK(out == generate(a.gpt, {1, 2, 3}, greedy));
  // The first new token is the argmax of the logits at the prompt's last position.
  Tape tape;
  Tensor tokens = Tensor::empty({1, 3}, DType::i32);
  for (int i = 0; i < 3; ++i) tokens.data<int32_t>()[i] = i + 1;
  const Tensor lg = a.gpt.logits(tape, tokens);
  const float* last = lg.data<float>() + 2 * 64;
  CHECK(std::max_element(last, last + 50) - last == out[0]);
  SampleOptions opt;
  opt.tokens = 30, opt.top_k = 5, opt.seed = 9;
  for (int32_t t : generate(a.gpt, {5}, opt)) CHECK((t >= 0 && t < 50));
  // top-p: a nucleus too small for a second candidate is greedy whatever k and the seed.
  SampleOptions nucleus = greedy;
  nucleus.top_k = 50, nucleus.top_p = 1e-6f, nucleus.temperature = 1.0f, nucleus.seed = 3;
  CHECK(generate(a.gpt, {1, 2, 3}, nucleus) == out);
  // A stop token ends the text after its first appearance.
  SampleOptions stop = greedy;
  stop.stop = {out[3]};
  const std::vector<int32_t> until = generate(a.gpt, {1, 2, 3}, stop);
  const size_t first = size_t(std::find(out.begin(), out.end(), out[3]) - out.begin());
  CHECK(until == std::vector<int32_t>(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(first) + 1));
  nucleus.top_p = 1.5f;
  CHECK_THROWS_AS(generate(a.gpt, {1}, nucleus), std::invalid_argument);
}
