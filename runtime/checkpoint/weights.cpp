#include "runtime/checkpoint/weights.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "models/foreign_formats.hpp"
#include "models/llmc_format.hpp"
#include "models/registry.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/frozen_base.hpp"
#include "runtime/text/tokenizer_files.hpp"

namespace zt {

namespace {

namespace fs = std::filesystem;

bool is_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// A folder given for weights must be a ztrain checkpoint; SavedCheckpoint's own error would not
// say that a file was expected too.
void check_checkpoint_folder(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(fs::path(path) / "meta.json", ec) && !fs::exists(fs::path(path) / "latest", ec))
    throw CheckpointError("checkpoint '" + path +
                          "' is a folder, but neither a ztrain checkpoint (meta.json or a 'latest' file) nor a Hugging "
                          "Face model (config.json); expected one of those or an llm.c checkpoint file");
}

// [Note: weights in file order] Every parameter, concatenated in the model's file order (GPT-2:
// llm.c's, [Note: units and llm.c's order] in models/gpt2.hpp), is the same stream of floats
// whatever the units (the embedding's row ranges, in order, are the embedding). So a ztrain
// checkpoint saved with other embedding units than the model's still maps onto it: each saved
// parameter is a piece of that stream, and each of the model's parameters reads the pieces that
// cover its part of it.
struct Piece {
  int64_t at;      // in the stream
  int unit;        // in the saved layout
  int64_t offset;  // within that unit
  int64_t n;
};

void load_saved(const std::string& path, Model& model) {
  SavedCheckpoint saved(path);
  if (saved.arch() != model.arch())
    throw saved.bad("holds a model of arch " + saved.arch() + ", but the model is " + model.arch());
  if (!(saved.dims() == model.dims()))
    throw saved.bad("holds a model of " + dims_str(saved.dims()) + ", but the model is " + dims_str(model.dims()));
  const std::unique_ptr<Model> saved_model = make_model(saved.arch(), saved.dims(), saved.wte_units());
  Model& layout = *saved_model;
  // A LoRA run's checkpoint holds adapters: its weights are the frozen model with them merged in
  // (runtime/checkpoint/frozen_base.hpp), the whole model in host memory, as a sampler holds it.
  std::vector<std::vector<float>> merged;
  if (saved.lora().enabled()) {
    layout.apply_lora(saved.lora());
    saved.check_layout(layout);
    merged.resize(static_cast<size_t>(layout.base_units()));
    for_each_merged_unit(saved, layout,
                         [&](int u, const float* p) { merged[size_t(u)].assign(p, p + layout.layout()[size_t(u)].numel); });
  }
  if (saved.units() != layout.num_units()) throw saved.bad("its units do not match its model's layout");
  std::vector<Piece> pieces;
  int64_t at = 0;
  layout.for_each_param_in_file_order([&](int u, int i) {
    const ParamSpec& p = layout.layout()[size_t(u)].params[size_t(i)];
    pieces.push_back({at, u, p.offset, shape_numel(p.shape)});
    at += pieces.back().n;
  });
  for (int u = 0; u < layout.num_units() && merged.empty(); ++u) {
    if (saved.numel(u) != layout.layout()[size_t(u)].numel)
      throw saved.bad("unit " + std::to_string(u) + " does not match its model's layout");
    saved.verify(u, 0, saved.numel(u));
  }
  at = 0;
  size_t k = 0;  // the piece holding `at`
  model.for_each_param_in_file_order([&](int u, int i) {
    const Tensor& t = model.param(u, i);
    const bool direct = t.device() == Device::cpu && t.dtype() == DType::f32;
    const Tensor host = direct ? t : Tensor::empty(t.shape(), DType::f32, MemCategory::other);
    const int64_t begin = at, end = at + t.numel();
    while (at < end) {
      while (pieces.at(k).at + pieces.at(k).n <= at) ++k;
      const Piece& p = pieces[k];
      const int64_t b = at - p.at, e = std::min(p.n, end - p.at);
      float* dst = host.data<float>() + (at - begin);
      if (merged.empty()) saved.read_master(p.unit, p.offset + b, p.offset + e, dst);
      else std::copy_n(merged[size_t(p.unit)].data() + p.offset + b, e - b, dst);
      at += e - b;
    }
    if (!direct) store_f32(t, host);
  });
}

// A foreign checkpoint's tensors, a unit at a time.
void load_foreign(const std::string& path, Model& model) {
  const std::unique_ptr<ForeignWeights> w = open_foreign_weights(path, model);
  for (int u = 0; u < model.base_units(); ++u) {
    const UnitLayout& lay = model.layout()[size_t(u)];
    const Tensor host = Tensor::empty({lay.numel}, DType::f32, MemCategory::other);
    w->read_unit_range(u, 0, lay.numel, host.data<float>());
    for (size_t i = 0; i < lay.params.size(); ++i)
      store_f32(model.param(u, static_cast<int>(i)), host.view(lay.params[i].offset, lay.params[i].shape));
  }
}

}  // namespace

StoredModel stored_model(const std::string& path) {
  if (const std::optional<ForeignCheckpoint> f = read_foreign_checkpoint(path))
    return {f->arch, f->dims, holds_tokenizer(path) ? path : ""};
  if (!is_folder(path)) return {llmc_arch(), read_llmc_header(path), ""};
  check_checkpoint_folder(path);
  const SavedCheckpoint saved(path);
  return {saved.arch(), saved.dims(), saved.tokenizer()};
}

// [Note: loading a shard] DeepSpeed and FSDP users watch every rank load the whole checkpoint into
// host memory before sharding it. Here rank r at stage 3 materializes one unit's full parameters
// at a time (zeros), reads from the file only the elements of its own shard (pread of those byte
// ranges, or of the quantized blocks that cover them), and keeps the shard: the peak is its shards
// plus one unit, and the file's bytes are read once across the ranks.
void load_weights_into(const std::string& path, Model& model, ZeroEngine& engine, uint64_t seed) {
  // Adapter units are not in the file: they start as the model initialises them.
  if (!read_foreign_checkpoint(path))
    return engine.write_full_params([&] {
      load_weights(path, model);
      for (int u = model.base_units(); u < model.num_units(); ++u) model.init_unit(u, seed);
    });
  const std::unique_ptr<ForeignWeights> w = open_foreign_weights(path, model);
  engine.write_params_by_unit([&](int u, int64_t begin, int64_t end) {
    if (u >= model.base_units()) return model.init_unit(u, seed);
    if (begin >= end) return;
    const Tensor full = engine.units()[u].param_view();
    const bool direct = full.device() == Device::cpu && full.dtype() == DType::f32;
    const Tensor host = direct ? full.view(begin, {end - begin}) : Tensor::empty({end - begin}, DType::f32, MemCategory::other);
    w->read_unit_range(u, begin, end, host.data<float>());
    if (!direct) store_f32(full.view(begin, {end - begin}), host);
  });
}

void load_weights(const std::string& path, Model& model) {
  if (read_foreign_checkpoint(path)) return load_foreign(path, model);
  if (!is_folder(path)) return load_llmc_checkpoint(path, model);
  check_checkpoint_folder(path);
  load_saved(path, model);
}

}  // namespace zt
