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

}  // namespace zt
