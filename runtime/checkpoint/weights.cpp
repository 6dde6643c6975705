#include "runtime/checkpoint/weights.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "models/llmc_format.hpp"
#include "models/registry.hpp"
#include "runtime/checkpoint/checkpoint.hpp"

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
                          "' is a folder, but not a ztrain checkpoint (it holds neither meta.json nor a 'latest' "
                          "file); expected an llm.c checkpoint file or a ztrain checkpoint folder or root");
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
  const Model& layout = *saved_model;
  if (saved.units() != layout.num_units()) throw saved.bad("its units do not match its model's layout");
  std::vector<Piece> pieces;
  int64_t at = 0;
  layout.for_each_param_in_file_order([&](int u, int i) {
    const ParamSpec& p = layout.layout()[size_t(u)].params[size_t(i)];
    pieces.push_back({at, u, p.offset, shape_numel(p.shape)});
    at += pieces.back().n;
  });
  for (int u = 0; u < layout.num_units(); ++u) {
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
      saved.read_master(p.unit, p.offset + b, p.offset + e, host.data<float>() + (at - begin));
      at += e - b;
    }
    if (!direct) store_f32(t, host);
  });
}

}  // namespace

StoredModel stored_model(const std::string& path) {
  if (!is_folder(path)) return {"gpt2", read_llmc_header(path)};  // llm.c's files hold GPT-2
  check_checkpoint_folder(path);
  const SavedCheckpoint saved(path);
  return {saved.arch(), saved.dims()};
}

void load_weights(const std::string& path, Model& model) {
  if (!is_folder(path)) return load_llmc_checkpoint(path, model);
  check_checkpoint_folder(path);
  load_saved(path, model);
}

}  // namespace zt
