// Text generation from a trained model: top-k sampling (k = 1 or temperature 0 is greedy) with
// temperature.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "models/model.hpp"

namespace zt {

struct SampleOptions {
  int tokens = 200;
  int top_k = 40;
  float temperature = 1.0f;  // >= 0; 0 is greedy
  uint64_t seed = 1337;
};

// Continues `prompt` (token ids, at least one) by `opt.tokens` tokens; returns only the new ones,
// and hands each to `emit` (when given) as soon as it is chosen. The context is the last
// max_seq_len tokens.
std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, const SampleOptions& opt,
                              const std::function<void(int32_t)>& emit = {});

}  // namespace zt
