// GPT-2 as the runtime and the file adapters see it ([Note: a new model] in models/model.hpp).
#include <nlohmann/json.hpp>

#include "models/gpt2.hpp"
#include "models/model_spec.hpp"

namespace zt {

ModelSpec gpt2_spec() {
  ModelSpec s;
  s.arch = "gpt2";
  s.family = "GPT-2";
  s.has_dim = [](std::string_view key) {  // llm.c's six
    int i = 0;
    bool has = false;
    ModelDims d;
    for_each_dim([&](const char* name, auto&) { has = has || (key == name && i < kGpt2DimCount), ++i; }, d);
    return has;
  };
  s.check_dims = [](const ModelDims&, const auto&, const auto&) {};
  s.num_params_f64 = gpt2_num_params_f64;
  s.make = [](const ModelDims& d, int units) -> std::unique_ptr<Model> { return std::make_unique<GPT2>(d, units); };
  s.lora_targets = {"c_attn"};
  s.llmc = true;
  s.hf_architectures = {"GPT2LMHeadModel"};
  s.hf_config = [](const ModelDims& d) {
    return nlohmann::json{{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", d.vocab_size},
                          {"n_positions", d.max_seq_len}, {"n_ctx", d.max_seq_len}, {"n_embd", d.n_embd},
                          {"n_layer", d.n_layer}, {"n_head", d.n_head}, {"activation_function", "gelu_new"},
                          {"layer_norm_epsilon", 1e-5}, {"tie_word_embeddings", true}};
  };
  s.peft_module_prefix = "transformer.";  // GPT2LMHeadModel's blocks; the hub's files drop it
  s.fan_in_fan_out = true;                // Conv1D stores (in, out)
  s.peer_args = [](const ModelDims& d) {
    return std::vector<std::string>{"--arch", "gpt2", "--padded-vocab", std::to_string(d.padded_vocab_size)};
  };
  return s;
}

}  // namespace zt
