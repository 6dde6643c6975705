// GPT-2's dimensions: what an llm.c checkpoint header and the config's `model` section give.
#pragma once

namespace zt {

struct GPT2Dims {
  int max_seq_len = 1024;
  int vocab_size = 50257;
  int padded_vocab_size = 50304;
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  bool operator==(const GPT2Dims&) const = default;
};

// The dimensions by their config and checkpoint names, for code that treats them alike.
struct GPT2DimField {
  const char* name;
  int GPT2Dims::*field;
};
inline constexpr GPT2DimField kGPT2DimFields[] = {
    {"n_layer", &GPT2Dims::n_layer},         {"n_head", &GPT2Dims::n_head},
    {"n_embd", &GPT2Dims::n_embd},           {"vocab_size", &GPT2Dims::vocab_size},
    {"padded_vocab_size", &GPT2Dims::padded_vocab_size}, {"max_seq_len", &GPT2Dims::max_seq_len},
};

}  // namespace zt
