// Text generation from a trained model: top-k sampling (k = 1 is greedy) with temperature.
#pragma once

#include <cstdint>
#include <vector>

#include "models/gpt2.hpp"

namespace zt {

struct SampleOptions {
  int tokens = 200;
  int top_k = 40;
  float temperature = 1.0f;
  uint64_t seed = 1337;
};

// Continues `prompt` (token ids, at least one) by `opt.tokens` tokens; returns only the new ones.
// The context is the last max_seq_len tokens.
std::vector<int32_t> generate(GPT2& model, const std::vector<int32_t>& prompt, const SampleOptions& opt);

}  // namespace zt
