// A model's dimensions: what the config's `model` section and a checkpoint header give. GPT-2's
// are all of them; an architecture with more (grouped-query heads, an MLP width of its own) adds
// fields here, each with its config name in kModelDimFields.
#pragma once

#include <string>

namespace zt {

struct ModelDims {
  int max_seq_len = 1024;
  int vocab_size = 50257;
  int padded_vocab_size = 50304;
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  bool operator==(const ModelDims&) const = default;
};

// The dimensions by their config and checkpoint names, for code that treats them alike.
struct ModelDimField {
  const char* name;
  int ModelDims::*field;
};
inline constexpr ModelDimField kModelDimFields[] = {
    {"n_layer", &ModelDims::n_layer},         {"n_head", &ModelDims::n_head},
    {"n_embd", &ModelDims::n_embd},           {"vocab_size", &ModelDims::vocab_size},
    {"padded_vocab_size", &ModelDims::padded_vocab_size}, {"max_seq_len", &ModelDims::max_seq_len},
};

std::string dims_str(const ModelDims& d);  // "n_layer 12, n_head 12, ..."

}  // namespace zt
