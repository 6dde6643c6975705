#include "runtime/checkpoint/export.hpp"

#include <vector>

#include "models/registry.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/model_writer.hpp"

namespace zt {

void export_checkpoint(const std::string& dir, const std::string& format, const std::string& out,
                       uint64_t max_shard_bytes) {
  SavedCheckpoint saved(dir);
  // The rename at the end would replace a file of the checkpoint being read (or its root's
  // `latest`): the export would destroy its own input.
  if (saved.owns(out))
    throw CheckpointError("export: --out '" + out + "' lies inside the checkpoint it reads ('" + saved.folder() +
                          "'); write the export elsewhere");
  const std::unique_ptr<Model> owned = make_model(saved.arch(), saved.dims(), saved.wte_units());
  const Model& model = *owned;
  saved.check_layout(model);
  auto writer = make_model_writer(format, out, "export --out", model, DType::f32, max_shard_bytes);
  std::vector<float> unit;
  for (int u = 0; u < model.num_units(); ++u) {
    const int64_t n = model.layout()[size_t(u)].numel;
    saved.verify(u, 0, n);
    unit.assign(static_cast<size_t>(n), 0.0f);
    saved.read_master(u, 0, n, unit.data());
    writer->write_unit(u, unit.data());
  }
  writer->finish();
}

}  // namespace zt
