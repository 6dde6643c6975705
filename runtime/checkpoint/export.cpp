#include "runtime/checkpoint/export.hpp"

#include <vector>

#include "models/registry.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/frozen_base.hpp"
#include "runtime/checkpoint/model_writer.hpp"
#include "runtime/file_io.hpp"

namespace zt {

void export_checkpoint(const std::string& dir, const std::string& format, const std::string& out,
                       uint64_t max_shard_bytes, bool merge_lora) {
  SavedCheckpoint saved(dir);
  // The rename at the end would replace a file of the checkpoint being read (or its root's
  // `latest`): the export would destroy its own input.
  if (saved.owns(out))
    throw CheckpointError("export: --out '" + out + "' lies inside the checkpoint it reads ('" + saved.folder() +
                          "'); write the export elsewhere");
  const LoraConfig lora = saved.lora();
  // Nor may it be, or hold, an input: the checkpoint, or the frozen model a LoRA checkpoint's
  // adapters belong to (a merge written over it would leave the adapters nothing to resume or
  // merge onto).
  auto refuse_over = [&](const std::string& input, const std::string& role) {
    if (!input.empty() && lies_within(input, out))
      throw CheckpointError("export: --out '" + out + "' is or holds " + role + " '" + input +
                            "', which the export would overwrite; write the export elsewhere");
  };
  refuse_over(saved.folder(), "the checkpoint it reads");
  if (lora.enabled()) refuse_over(saved.frozen_source().init_from, "the frozen model of this LoRA checkpoint");
  const std::unique_ptr<Model> owned = make_model(saved.arch(), saved.dims(), saved.wte_units());
  Model& model = *owned;
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
