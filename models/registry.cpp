#include "models/registry.hpp"

#include <algorithm>
#include <stdexcept>

#include "models/gpt2.hpp"

namespace zt {

namespace {
[[noreturn]] void unknown(const std::string& arch) {
  throw std::invalid_argument("model arch \"" + arch + "\" is not implemented (expected \"gpt2\")");
}
}  // namespace

std::vector<std::string> model_archs() { return {"gpt2"}; }

bool is_model_arch(const std::string& arch) {
  const std::vector<std::string> archs = model_archs();
  return std::find(archs.begin(), archs.end(), arch) != archs.end();
}

double model_num_params_f64(const std::string& arch, const ModelDims& d) {
  if (!is_model_arch(arch)) unknown(arch);
  return gpt2_num_params_f64(d);
}

std::unique_ptr<Model> make_model(const std::string& arch, const ModelDims& d, int embedding_units) {
  if (!is_model_arch(arch)) unknown(arch);
  return std::make_unique<GPT2>(d, embedding_units);
}

}  // namespace zt
