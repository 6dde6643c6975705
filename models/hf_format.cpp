#include "models/hf_format.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "models/foreign_formats.hpp"
#include "models/hf_config.hpp"
#include "models/registry.hpp"
#include "files/json_text.hpp"
#include "files/safetensors_file.hpp"

namespace zt {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("'" + path + "': cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  JsonParsed<json> p = parse_json(text.str());  // [Note: JSON from files] in files/json_text.hpp
  if (!p.ok()) throw std::runtime_error("'" + path + "': not valid JSON: " + p.error);
  return std::move(p.value);
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

HfModel read_hf_config(const std::string& folder) {
  const std::string path = (fs::path(folder) / "config.json").string();
  const json j = read_json(path);
  if (!j.is_object()) throw std::runtime_error("'" + path + "': expected a JSON object");
  const json* archs = HfConfig::find(j, "architectures");
  const std::string arch = archs && archs->is_array() && archs->size() == 1 && (*archs)[0].is_string() ? (*archs)[0].get<std::string>() : "";
  const ModelSpec* spec = hf_model_spec(arch);
  if (!spec)
    throw std::runtime_error("'" + path + "': architectures: " + (archs ? show_json(*archs) : std::string("missing")) +
                             " is not a model ztrain trains from Hugging Face files (" + hf_architectures_text() + ")");
  HfModel m{spec->arch, spec->dims_from_hf(HfConfig(path, j, arch)), ""};
  const fs::path single = fs::path(folder) / "model.safetensors", index = fs::path(folder) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) m.weights = index.string();
  else if (fs::exists(single, ec)) m.weights = single.string();
  else throw std::runtime_error("'" + folder + "': holds config.json but neither model.safetensors nor model.safetensors.index.json");
  return m;
}

std::unique_ptr<TensorFile> open_hf_weights(const HfModel& m) { return open_safetensors(m.weights); }

FileTensorMap hf_tensor_map() {
  return {[](const ParamSpec& p) { return p.hf_name; }, {}};
}

void check_hf_tensors(const TensorFile& f, const Model& model, const std::string& folder) {
  const bool tied = model.dims().tie_word_embeddings;
  check_file_tensors(f, model, hf_tensor_map(), "'" + folder + "'", [&](const std::string& name) {
    return (tied && name == "lm_head.weight") || name.ends_with("rotary_emb.inv_freq");
  });
}

std::string hf_config_json(const Model& model, const std::string& torch_dtype) {
  nlohmann::json j = model_spec(model.arch()).hf_config(model.dims());
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

}  // namespace zt
