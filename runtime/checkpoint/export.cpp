#include "runtime/checkpoint/export.hpp"

#include <vector>

#include "models/registry.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/frozen_base.hpp"
#include "runtime/checkpoint/model_writer.hpp"

namespace zt {

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
  const LoraConfig lora = saved.lora();
  if (lora.enabled()) model.apply_lora(lora);
  saved.check_layout(model);
  if (format == "peft") {
    if (!lora.enabled())
      throw saved.bad("export: --format peft writes LoRA adapters, and this checkpoint was trained without a lora section");
    auto writer =
        make_model_writer(format, out, "export --out", model, DType::f32, max_shard_bytes, saved.frozen_source().init_from);
    std::vector<float> unit;
    for (int u = model.base_units(); u < model.num_units(); ++u) {
      saved.read_unit(u, unit);
      writer->write_unit(u, unit.data());
    }
    return writer->finish();
  }
  if (lora.enabled() != merge_lora)
    throw saved.bad(lora.enabled() ? "export: this checkpoint holds LoRA adapters over a frozen model: --format peft "
                                     "writes the adapters, --merge-lora the model with them merged in"
                                   : "export: --merge-lora: this checkpoint was trained without a lora section");
  auto writer = make_model_writer(format, out, "export --out", model, DType::f32, max_shard_bytes);
  if (lora.enabled()) {
    for_each_merged_unit(saved, model, [&](int u, const float* params) { writer->write_unit(u, params); });
  } else {
    std::vector<float> unit;
    for (int u = 0; u < model.num_units(); ++u) {
      saved.read_unit(u, unit);
      writer->write_unit(u, unit.data());
    }
  }
  writer->finish();
}

}  // namespace zt
