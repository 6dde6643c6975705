#include "models/registry.hpp"

#include <algorithm>
#include <stdexcept>

#include "models/gpt2.hpp"
#include "models/llama.hpp"

namespace zt {

namespace {
[[noreturn]] void unknown(const std::string& arch) {
  throw std::invalid_argument("model arch \"" + arch + "\" is not implemented (expected " + model_archs_text() + ")");
}
}  // namespace

std::vector<std::string> model_archs() { return {"gpt2", "llama"}; }

std::string model_archs_text() {
  const std::vector<std::string> archs = model_archs();
  std::string s;
  for (size_t i = 0; i < archs.size(); ++i)
    s += (i == 0 ? "" : i + 1 == archs.size() ? " or " : ", ") + ("\"" + archs[i] + "\"");
  return s;
}

bool is_model_arch(const std::string& arch) {
  const std::vector<std::string> archs = model_archs();
  return std::find(archs.begin(), archs.end(), arch) != archs.end();
}

double model_num_params_f64(const std::string& arch, const ModelDims& d) {
  if (arch == "gpt2") return gpt2_num_params_f64(d);
  if (arch == "llama") return llama_num_params_f64(d);
  unknown(arch);
}

std::unique_ptr<Model> make_model(const std::string& arch, const ModelDims& d, int embedding_units) {
  if (arch == "gpt2") return std::make_unique<GPT2>(d, embedding_units);
  if (arch == "llama") return std::make_unique<Llama>(d, embedding_units);
  unknown(arch);
}

}  // namespace zt
