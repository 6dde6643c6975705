// GPT-2 layout, initialisation, llm.c checkpoint files, and sampling.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "models/gpt2.hpp"
#include "runtime/config.hpp"
#include "runtime/sample.hpp"
#include "runtime/trainer.hpp"
#include "tests/model_fixture.hpp"
#include "tests/test_util.hpp"

using namespace zt;

namespace {
const GPT2Dims kTiny{/*maxT*/ 16, /*V*/ 50, /*Vp*/ 64, /*L*/ 3, /*NH*/ 2, /*C*/ 8};

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

TEST_CASE("init: GPT-2 statistics, padded rows zero, reproducible") {
  const GPT2Dims d{64, 500, 512, 4, 4, 64};
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
  for (int32_t t : generate(a.gpt, {5}, SampleOptions{30, 5, 1.0f, 9})) CHECK((t >= 0 && t < 50));
}
