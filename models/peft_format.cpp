#include "models/peft_format.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "files/json_text.hpp"
#include "files/safetensors_file.hpp"
#include "models/registry.hpp"

namespace zt {

namespace {
using json = nlohmann::json;
namespace fs = std::filesystem;

// The causal-LM model's path to the modules our Hugging Face names start from (ModelSpec).
std::string module_prefix(const Model& model) { return model_spec(model.arch()).peft_module_prefix; }

}  // namespace

std::string peft_tensor_name(const Model& model, const ParamSpec& p) {
  return "base_model.model." + module_prefix(model) + p.hf_name;
}

std::string peft_config_json(const Model& model, const std::string& base_model) {
  const LoraConfig& l = model.lora();
  const std::vector<std::string> t = l.targets(model.arch());
  json j = {{"peft_type", "LORA"},
            {"task_type", "CAUSAL_LM"},
            {"base_model_name_or_path", base_model.empty() ? json() : json(base_model)},
            {"r", l.r},
            {"lora_alpha", l.alpha},
            {"lora_dropout", l.dropout},
            {"use_rslora", l.use_rslora},
            {"bias", "none"},
            // GPT-2's Conv1D stores its weights (in, out), which PEFT's merge must know.
            {"fan_in_fan_out", model_spec(model.arch()).fan_in_fan_out},
            {"init_lora_weights", l.init == "gaussian" ? json("gaussian") : json(true)},
            {"inference_mode", true},
            {"modules_to_save", nullptr}};
  j["target_modules"] = t.size() == 1 && t[0] == "all-linear" ? json("all-linear") : json(t);
  return j.dump(2) + "\n";
}

PeftAdapters::PeftAdapters(const std::string& path, const Model& model) : model_(model) {
  std::error_code ec;
  const bool folder = fs::is_directory(path, ec);
  const std::string weights = folder ? (fs::path(path) / "adapter_model.safetensors").string() : path;
  const std::string config = (folder ? fs::path(path) : fs::path(path).parent_path()) / "adapter_config.json";
  std::ifstream in(config, std::ios::binary);
  if (!in) throw std::runtime_error("lora.init_from: '" + config + "' cannot be read (a PEFT adapter folder holds it)");
  std::ostringstream text;
  text << in.rdbuf();
  JsonParsed<json> parsed = parse_json(text.str());  // [Note: JSON from files] in files/json_text.hpp
  if (!parsed.ok()) throw std::runtime_error("lora.init_from: '" + config + "' is not valid JSON: " + parsed.error);
  if (!parsed.value.is_object()) throw std::runtime_error("lora.init_from: '" + config + "' is not a JSON object");
  const json c = std::move(parsed.value);
  // Each key as the type PEFT writes it, else named: value() would throw nlohmann's type error.
  auto typed = [&](const char* key, bool ok, const char* type) {
    if (c.contains(key) && !ok)
      throw std::runtime_error("lora.init_from: '" + config + "': " + key + " is " + show_json(c[key]) + ", not " + type);
  };
  typed("peft_type", c.value("peft_type", json("LORA")).is_string(), "a string");
  typed("r", c.value("r", json(0)).is_number_integer(), "an integer");
  typed("lora_alpha", c.value("lora_alpha", json(0)).is_number(), "a number");
  typed("use_rslora", c.value("use_rslora", json(false)).is_boolean(), "true or false");
  const LoraConfig& l = model.lora();
  auto differs = [&](const char* key, const std::string& theirs, const std::string& ours) {
    throw std::runtime_error("lora.init_from: '" + config + "' has " + key + " " + theirs + ", this run's lora section " +
                             ours + ": the adapters would not mean the same");
  };
  if (c.value("peft_type", std::string("LORA")) != "LORA") differs("peft_type", show_json(c.at("peft_type")), "is LoRA");
  if (c.value("r", 0) != l.r) differs("r", show_json(c.value("r", json())), "r " + std::to_string(l.r));
  if (std::abs(c.value("lora_alpha", 0.0) - l.alpha) > 1e-12)
    differs("lora_alpha", show_json(c.value("lora_alpha", json())), "alpha " + json(l.alpha).dump());
  if (c.value("use_rslora", false) != l.use_rslora)
    differs("use_rslora", json(c.value("use_rslora", false)).dump(), "use_rslora " + json(l.use_rslora).dump());
  file_ = open_safetensors(weights);
  std::set<std::string> ours;
  for (int u = model.base_units(); u < model.num_units(); ++u)
    for (const ParamSpec& p : model.layout()[size_t(u)].params) {
      const std::string name = peft_tensor_name(model, p);
      ours.insert(name);
      const TensorFileEntry* e = file_->find(name);
      if (!e) throw std::runtime_error("lora.init_from: '" + weights + "' has no tensor '" + name + "' (this run adapts it)");
      if (e->shape != p.shape)
        throw std::runtime_error("lora.init_from: '" + weights + "': tensor '" + name + "' is not the model's shape");
    }
  for (const TensorFileEntry& e : file_->entries())
    if (!ours.count(e.name))
      throw std::runtime_error("lora.init_from: '" + weights + "' holds '" + e.name +
                               "', which this run's lora.target_modules do not adapt");
}

void PeftAdapters::read_unit(int u, float* out) const {
  for (const ParamSpec& p : model_.layout().at(size_t(u)).params)
    file_->read_f32(peft_tensor_name(model_, p), 0, shape_numel(p.shape), out + p.offset);
}

}  // namespace zt
