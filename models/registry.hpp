// The one place that knows the concrete models: each architecture by its `model.arch` name, with
// what the runtime needs of it before and after a model exists. [Note: a new model] in
// models/model.hpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.hpp"

namespace zt {

// The architectures built in, by name ("gpt2", "llama").
std::vector<std::string> model_archs();
// The same for a message: "\"gpt2\" or \"llama\"".
std::string model_archs_text();
bool is_model_arch(const std::string& arch);

// Parameters of a model of these dimensions, in floating point and without building it: a
// header's or a config's dimensions may describe more than int64 or memory can hold, and are
// refused by this count first.
double model_num_params_f64(const std::string& arch, const ModelDims& d);

// embedding_units: how many row ranges the token embedding is cut into (GPT-2's wte_units); 0
// lets the model choose.
std::unique_ptr<Model> make_model(const std::string& arch, const ModelDims& d, int embedding_units = 0);

}  // namespace zt
