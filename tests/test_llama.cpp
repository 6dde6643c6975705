// The Llama family's layout and dimensions, without a reference: units and their sizes, the fused
// views over adjacent parameters, the parameter count by formula, and RoPE's frequencies with
// Llama 3.1's scaling. (tests/test_llama_hf.cpp holds the math to transformers.)
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "models/llama.hpp"
#include "models/registry.hpp"

using namespace zt;

namespace {
ModelDims tiny(bool tied, bool bias) {
  ModelDims d;
  d.max_seq_len = 32, d.vocab_size = 100, d.padded_vocab_size = 128, d.n_layer = 3, d.n_head = 4, d.n_embd = 32;
  d.n_kv_head = 2, d.head_dim = 12, d.intermediate_size = 40, d.tie_word_embeddings = tied, d.attention_bias = bias;
  return d;
}
}  // namespace

TEST_CASE("llama layout: units, sizes, fused views and the parameter count") {
  for (bool tied : {true, false})
    for (bool bias : {false, true}) {
      CAPTURE(tied);
      CAPTURE(bias);
      const ModelDims d = tiny(tied, bias);
      const std::unique_ptr<Model> m = make_model("llama", d, 4);
      const auto& units = m->layout();
      CHECK(m->num_units() == 4 + 3 + 1 + (tied ? 0 : 4));
      CHECK(units[0].name == "embedding");
      CHECK(units[4].name == "block0");
      CHECK(units[7].name == "final");
      if (!tied) CHECK(units[8].params[0].hf_name == "lm_head.weight");
      CHECK(static_cast<double>(m->num_params()) == llama_num_params_f64(d));
      // q, k, v adjacent and of one width: the fused qkv view is (NH + 2 NKV) head_dim rows.
      const UnitLayout& b = units[4];
      REQUIRE(b.fused.size() == (bias ? 3u : 2u));
      const ParamSpec& q = b.params[size_t(b.fused[0].first)];
      CHECK(q.hf_name == "model.layers.0.self_attn.q_proj.weight");
      CHECK(b.params[size_t(b.fused[0].first + 2)].offset + 2 * 12 * 32 == b.params[size_t(b.fused[0].first + 3)].offset);
      const ParamSpec& gate = b.params[size_t(b.fused[1].first)];
      CHECK(gate.hf_name == "model.layers.0.mlp.gate_proj.weight");
      CHECK(b.params[size_t(b.fused[1].first + 1)].offset == gate.offset + 40 * 32);
      // The embedding's rows by range, their Hugging Face rows capped at the vocabulary.
      for (int k = 0; k < 4; ++k) {
        CHECK(units[size_t(k)].params[0].row0 == 32 * k);
        CHECK(units[size_t(k)].params[0].hf_rows == 100);
      }
    }
  // The automatic cut keeps every embedding unit no larger than a block.
  const std::unique_ptr<Model> m = make_model("llama", tiny(false, false));
  for (int k = 0; k < m->embedding_units(); ++k) CHECK(m->layout()[size_t(k)].numel <= m->layout()[size_t(m->block_unit(0))].numel);
  CHECK_THROWS_WITH_AS(make_model("llama", tiny(true, false), 3), doctest::Contains("must be >= 1 and divide padded_vocab_size 128"),
                       std::invalid_argument);
  ModelDims odd = tiny(true, false);
  odd.n_kv_head = 3;
  CHECK_THROWS_WITH_AS(make_model("llama", odd), "llama: n_kv_head 3 must divide n_head 4", std::invalid_argument);
}

TEST_CASE("llama RoPE frequencies: theta, and Llama 3.1's scaling by wavelength") {
  ModelDims d = tiny(true, false);
  d.head_dim = 16, d.rope_theta = 10000.0;
  std::vector<float> f = llama_inv_freq(d);
  REQUIRE(f.size() == 8);
  for (int i = 0; i < 8; ++i) CHECK(f[size_t(i)] == doctest::Approx(std::pow(10000.0, -2.0 * i / 16)).epsilon(1e-6));
  d.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 16};
  const std::vector<float> s = llama_inv_freq(d);
  for (int i = 0; i < 8; ++i) {
    const double wavelen = 2 * std::numbers::pi / f[size_t(i)];
    CAPTURE(wavelen);
    if (wavelen < 16.0 / 4.0) CHECK(s[size_t(i)] == f[size_t(i)]);           // high frequencies kept
    else if (wavelen > 16.0) CHECK(s[size_t(i)] == doctest::Approx(f[size_t(i)] / 8).epsilon(1e-6));  // low ones / factor
    else CHECK((s[size_t(i)] < f[size_t(i)] && s[size_t(i)] > f[size_t(i)] / 8));  // interpolated between
  }
}
