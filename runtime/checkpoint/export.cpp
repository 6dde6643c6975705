#include "runtime/checkpoint/export.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/cpu/kernels.hpp"
#include "models/foreign_formats.hpp"
#include "models/registry.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/model_writer.hpp"
#include "runtime/checkpoint/weights.hpp"

namespace zt {

namespace {

// The lora section a checkpoint was trained with (none: r 0).
LoraConfig saved_lora(const SavedCheckpoint& saved) {
  LoraConfig l;
  const nlohmann::json j = saved.meta().value("lora", nlohmann::json());
  if (j.is_null()) return l;
  try {
    l.r = j.at("r").get<int>();
    l.alpha = j.at("alpha").get<double>();
    l.target_modules = j.at("target_modules").get<std::vector<std::string>>();
    l.use_rslora = j.value("use_rslora", false);
  } catch (const nlohmann::json::exception& e) {
    throw saved.bad(std::string("malformed lora section: ") + e.what());
  }
  return l;
}

// The frozen model a LoRA checkpoint's adapters were trained on, a model unit at a time: read
// again from the run's model.init_from (a foreign file a unit at a time; an llm.c or ztrain
// checkpoint whole) or initialised from its train.seed, rounded through the run's wire dtype as
// the run held it, and checked against the checksum the checkpoint recorded ([Note: frozen
// units' checksum] in checkpoint.cpp).
class FrozenBase {
 public:
  FrozenBase(SavedCheckpoint& saved, Model& model) : saved_(saved), model_(model) {
    const nlohmann::json& f = saved.meta().at("frozen");
    if (f.value("init_from", nlohmann::json()).is_string()) from_ = f.at("init_from").get<std::string>();
    seed_ = f.value("seed", uint64_t{0});
    want_ = f.value("checksum", std::string());
    if (!from_.empty() && read_foreign_checkpoint(from_)) {
      foreign_ = open_foreign_weights(from_, model);
    } else {  // every model unit bound to host memory, then read or initialised whole
      for (int u = 0; u < model.num_units(); ++u) {
        whole_.push_back(Tensor::zeros({model.layout()[size_t(u)].numel}, DType::f32, MemCategory::other));
        model.bind_unit(u, whole_.back(), Tensor());
      }
      if (from_.empty()) {
        for (int u = 0; u < model.base_units(); ++u) model.init_unit(u, seed_);
      } else {
        load_weights(from_, model);
      }
    }
  }

  // Model unit u's frozen values into out (numel floats).
  void read_unit(int u, float* out) {
    const int64_t n = model_.layout()[size_t(u)].numel;
    if (foreign_) foreign_->read_unit_range(u, 0, n, out);
    else std::copy_n(whole_[size_t(u)].data<float>(), n, out);
    if (saved_.wire() != DType::f32) {  // as the run held them
      std::vector<uint16_t> low(static_cast<size_t>(n));
      cpu::cast(low.data(), saved_.wire(), out, DType::f32, static_cast<size_t>(n));
      cpu::cast(out, DType::f32, low.data(), saved_.wire(), static_cast<size_t>(n));
    }
    sum_ += frozen_hash(u, 0, out, n);
  }

  // After every model unit was read: CheckpointError unless they are what the run trained on.
  void check() const {
    char have[17];
    std::snprintf(have, sizeof have, "%016llx", static_cast<unsigned long long>(sum_));
    if (want_ != have)
      throw saved_.bad("its adapters were trained on a frozen model (checksum " + want_ + ") other than " +
                       (from_.empty() ? "train.seed " + std::to_string(seed_) + "'s" : "'" + from_ + "'") +
                       " is now (checksum " + std::string(have) + "); the merged model would be wrong");
  }

  const std::string& from() const { return from_; }

 private:
  SavedCheckpoint& saved_;
  Model& model_;
  std::string from_, want_;
  uint64_t seed_ = 0, sum_ = 0;
  std::unique_ptr<ForeignWeights> foreign_;
  std::vector<Tensor> whole_;
};

}  // namespace

void export_checkpoint(const std::string& dir, const std::string& format, const std::string& out,
                       uint64_t max_shard_bytes, bool merge_lora) {
  SavedCheckpoint saved(dir);
  // The rename at the end would replace a file of the checkpoint being read (or its root's
  // `latest`): the export would destroy its own input.
  if (saved.owns(out))
    throw CheckpointError("export: --out '" + out + "' lies inside the checkpoint it reads ('" + saved.folder() +
                          "'); write the export elsewhere");
  const std::unique_ptr<Model> owned = make_model(saved.arch(), saved.dims(), saved.wte_units());
  Model& model = *owned;
  const LoraConfig lora = saved_lora(saved);
  if (lora.enabled()) model.apply_lora(lora);
  saved.check_layout(model);
  auto read_unit = [&](int u, std::vector<float>& unit) {
    const int64_t n = model.layout()[size_t(u)].numel;
    saved.verify(u, 0, n);
    unit.assign(static_cast<size_t>(n), 0.0f);
    saved.read_master(u, 0, n, unit.data());
  };
  if (format == "peft") {
    if (!lora.enabled())
      throw saved.bad("export: --format peft writes LoRA adapters, and this checkpoint was trained without a lora section");
    const nlohmann::json& f = saved.meta().at("frozen");
    const std::string base = f.value("init_from", nlohmann::json()).is_string() ? f.at("init_from").get<std::string>() : "";
    auto writer = make_model_writer(format, out, "export --out", model, DType::f32, max_shard_bytes, base);
    std::vector<float> unit;
    for (int u = model.base_units(); u < model.num_units(); ++u) {
      read_unit(u, unit);
      writer->write_unit(u, unit.data());
    }
    return writer->finish();
  }
  if (lora.enabled() != merge_lora)
    throw saved.bad(lora.enabled() ? "export: this checkpoint holds LoRA adapters over a frozen model: --format peft "
                                     "writes the adapters, --merge-lora the model with them merged in"
                                   : "export: --merge-lora: this checkpoint was trained without a lora section");
  auto writer = make_model_writer(format, out, "export --out", model, DType::f32, max_shard_bytes);
  std::vector<std::vector<float>> adapters(static_cast<size_t>(model.num_units()));
  for (int u = model.base_units(); u < model.num_units(); ++u) read_unit(u, adapters[size_t(u)]);
  std::unique_ptr<FrozenBase> base = lora.enabled() ? std::make_unique<FrozenBase>(saved, model) : nullptr;
  std::vector<float> unit;
  for (int u = 0; u < model.base_units(); ++u) {
    if (base) {
      unit.assign(static_cast<size_t>(model.layout()[size_t(u)].numel), 0.0f);
      base->read_unit(u, unit.data());
      model.merge_lora(u, unit.data(), [&](int v) { return adapters[size_t(v)].data(); });
    } else {
      read_unit(u, unit);
    }
    writer->write_unit(u, unit.data());
  }
  if (base) base->check();  // before the file takes its name
  writer->finish();
}

}  // namespace zt
