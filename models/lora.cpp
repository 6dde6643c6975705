#include "models/lora.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "kernels/ops.hpp"
#include "models/init.hpp"
#include "models/model.hpp"
#include "models/registry.hpp"

namespace zt {

float LoraConfig::scale() const {
  const double r_ = r;
  return static_cast<float>(use_rslora ? alpha / std::sqrt(r_) : alpha / r_);
}

std::vector<std::string> LoraConfig::targets(const std::string& arch) const {
  return target_modules.empty() ? default_lora_targets(arch) : target_modules;
}

const LoraTerms& projection_lora(const BlockLora* lora, int k) {
  static const LoraTerms none;
  return lora ? (*lora)[size_t(k)] : none;
}

Tensor adapted_linear(Tape& tape, const Tensor& x, const Tensor& weight, const Tensor& bias, const LoraTerms& lora) {
  Tensor y = ops::linear(tape, x, weight, bias);
  for (const LoraTerm& t : lora) {
    const Tensor in = ops::dropout(tape, x, t.dropout, t.seed);
    y = ops::add_columns(tape, y, ops::linear(tape, ops::linear(tape, in, t.a, Tensor()), t.b, Tensor()), t.col0, t.scale);
  }
  return y;
}

std::vector<std::string> default_lora_targets(const std::string& arch) {
  const ModelSpec* s = find_model_spec(arch);
  return s ? s->lora_targets : std::vector<std::string>{};
}

bool lora_target_matches(const std::string& module, const std::string& target) {
  return module == target || module.ends_with("." + target);
}

std::string lora_module(const std::string& hf_name) {
  constexpr std::string_view kWeight = ".weight";
  return hf_name.ends_with(kWeight) ? hf_name.substr(0, hf_name.size() - kWeight.size()) : "";
}

std::vector<std::vector<LoraAdapter>> add_lora_units(std::vector<UnitLayout>& layout, const LoraConfig& c,
                                                     const std::string& arch, int first_tensor) {
  if (c.r < 1) throw std::invalid_argument("lora.r: " + std::to_string(c.r) + " must be at least 1");
  const std::vector<std::string> targets = c.targets(arch);
  if (targets.empty())
    throw std::invalid_argument("lora.target_modules: none given, and arch " + arch + " has no default");
  std::vector<int> hits(targets.size(), 0);
  std::set<std::string> linear;  // the blocks' linear modules' last names, for the message
  const int base = static_cast<int>(layout.size());
  std::vector<std::vector<LoraAdapter>> adapters(static_cast<size_t>(base));
  std::vector<UnitLayout> added;
  int tensor = first_tensor;
  for (int u = 0; u < base; ++u) {
    UnitLayout& lay = layout[size_t(u)];
    if (lay.runs_with >= 0) throw std::logic_error("add_lora_units: " + lay.name + " is an adapter unit already");
    UnitLayout ad{lay.name + ".lora", {}, 0, {}};
    ad.runs_with = u;
    for (int i = 0; i < static_cast<int>(lay.params.size()); ++i) {
      ParamSpec& p = lay.params[size_t(i)];
      p.trainable = false;
      const std::string module = lora_module(p.hf_name);
      const bool is_linear = p.layer >= 0 && p.shape.size() == 2 && !module.empty();
      if (is_linear) linear.insert(module.substr(module.rfind('.') + 1));
      int matched = -1;
      for (size_t t = 0; t < targets.size() && !module.empty(); ++t)
        if (targets[t] == "all-linear" ? is_linear : lora_target_matches(module, targets[t]))
          ++hits[t], matched = static_cast<int>(t);
      if (matched < 0) continue;
      if (!is_linear)
        throw std::invalid_argument("lora.target_modules: \"" + targets[size_t(matched)] + "\" matches " + module +
                                    ", which is not a linear layer of the blocks (LoRA adapts those)");
      const int64_t OC = p.shape[0], C = p.shape[1];
      if (c.r > std::min(OC, C))
        throw std::invalid_argument("lora.r: " + std::to_string(c.r) + " is larger than " + module + " (" +
                                    std::to_string(OC) + " x " + std::to_string(C) + ") allows");
      const LoraAdapter a{i, base + static_cast<int>(added.size()), static_cast<int>(ad.params.size()),
                          static_cast<int>(ad.params.size()) + 1};
      add_param(ad, {p.name + ".lora_A", p.layer, {c.r, C}, 0, true, tensor++, 0, true, module + ".lora_A.weight", c.r, false});
      add_param(ad, {p.name + ".lora_B", p.layer, {OC, c.r}, 0, true, tensor++, 0, true, module + ".lora_B.weight", OC, false});
      adapters[size_t(u)].push_back(a);
    }
    if (!ad.params.empty()) added.push_back(std::move(ad));
  }
  for (size_t t = 0; t < targets.size(); ++t) {
    if (hits[t]) continue;
    std::string names;
    for (const std::string& n : linear) names += (names.empty() ? "" : ", ") + n;
    throw std::invalid_argument("lora.target_modules: \"" + targets[t] + "\" matches no module of this " + arch +
                                " model (its linear layers: " + names + ")");
  }
  for (UnitLayout& a : added) layout.push_back(std::move(a));
  return adapters;
}

void init_lora_unit(const UnitLayout& unit, const LoraConfig& c, uint64_t seed, float* params) {
  for (const ParamSpec& p : unit.params) {
    float* x = params + p.offset;
    const size_t n = static_cast<size_t>(shape_numel(p.shape));
    if (p.name.ends_with(".lora_B")) {
      std::fill_n(x, n, 0.0f);
    } else if (c.init == "gaussian") {
      fill_normal(x, n, 1.0f / static_cast<float>(c.r), seed, static_cast<uint64_t>(p.tensor));
    } else {
      fill_uniform(x, n, 1.0f / std::sqrt(static_cast<float>(p.shape[1])), seed, static_cast<uint64_t>(p.tensor));
    }
  }
}

}  // namespace zt
