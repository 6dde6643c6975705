// Text generation from a trained model: top-k and top-p (nucleus) sampling with temperature
// (k = 1 or temperature 0 is greedy), stopping at a stop token.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "models/model.hpp"

namespace zt {

struct SampleOptions {
  int tokens = 200;
  int top_k = 40;
  float top_p = 1.0f;        // in (0, 1]: the fewest most likely tokens whose probabilities reach it
  float temperature = 1.0f;  // >= 0; 0 is greedy
  uint64_t seed = 1337;
  std::vector<int32_t> stop;  // generation ends after one of these (a chat's end-of-turn token)
};

// Continues `prompt` (token ids, at least one) by up to `opt.tokens` tokens, ending after a stop
// token; returns only the new ones, and hands each to `emit` (when given) as soon as it is chosen.
// The context is the last max_seq_len tokens.
std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, const SampleOptions& opt,
                              const std::function<void(int32_t)>& emit = {});

}  // namespace zt
