#include "runtime/checkpoint/model_writer.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/cpu/kernels.hpp"
#include "models/foreign_formats.hpp"
#include "models/llmc_format.hpp"
#include "models/peft_format.hpp"
#include "runtime/file_io.hpp"

namespace zt {

namespace {

// A file written at known offsets under a temporary name, renamed into place by finish() ([Note:
// replacing a file] in runtime/file_io.hpp); a writer destroyed before finish() leaves nothing.
class PositionedWriter : public ModelWriter {
 protected:
  PositionedWriter(const std::string& path, const std::string& what) : out_(path, what), file_(&out_.file()) {}
  void finish() override { out_.commit(); }
  ReplacedFile out_;
  CheckpointFile* file_;
};

// llm.c's layout: 256 int32 of header, then the parameters in the model's file order ([Note: units
// and llm.c's order] in models/gpt2.hpp), so a unit's tensors land at scattered offsets.
class LlmcWriter final : public PositionedWriter {
 public:
  LlmcWriter(const std::string& path, const std::string& what, const Model& model)
      : PositionedWriter(path, what), model_(model) {
    const LlmcHeader h = llmc_header(model.dims());
    file_->write_at(h.data(), sizeof h, 0);
    uint64_t at = sizeof h;
    offsets_.resize(static_cast<size_t>(model.num_units()));
    for (int u = 0; u < model.num_units(); ++u) offsets_[size_t(u)].resize(model.layout()[size_t(u)].params.size());
    model.for_each_param_in_file_order([&](int u, int i) {
      offsets_[size_t(u)][size_t(i)] = at;
      at += static_cast<uint64_t>(shape_numel(model.layout()[size_t(u)].params[size_t(i)].shape)) * sizeof(float);
    });
  }
  void write_unit(int u, const float* params) override {
    if (u >= model_.base_units()) return;  // adapters are PEFT's to write
    const auto& ps = model_.layout()[size_t(u)].params;
    for (size_t i = 0; i < ps.size(); ++i)
      file_->write_at(params + ps[i].offset, static_cast<size_t>(shape_numel(ps[i].shape)) * sizeof(float),
                      offsets_[size_t(u)][i]);
  }

 private:
  const Model& model_;
  std::vector<std::vector<uint64_t>> offsets_;  // [unit][param]
};

// Hugging Face's names and layouts from each ParamSpec: the tensors in the order the units first
// hold them, each the first hf_rows rows of the model tensor (a padded vocabulary's extra rows are
// not in the file), whose row ranges in several units land at their rows' offsets. `include`
// picks the tensors of one shard of a split model (all of them when empty). The model's own
// units, or with `adapters` its adapter units under PEFT's names (models/peft_format.hpp).
class SafetensorsWriter final : public PositionedWriter {
 public:
  SafetensorsWriter(const std::string& path, const std::string& what, const Model& model, DType dtype,
                    const std::function<bool(const std::string& hf_name)>& include = {}, bool adapters = false)
      : PositionedWriter(path, what), model_(model), dtype_(dtype) {
    const size_t es = dtype_size(dtype);
    const char* type = dtype == DType::f32 ? "F32" : dtype == DType::bf16 ? "BF16" : "F16";
    nlohmann::json header = nlohmann::json::object();
    header["__metadata__"] = {{"format", "pt"}, {"producer", "ztrain"}};
    std::map<std::string, uint64_t> tensor_at;  // each tensor's offset in the data
    uint64_t at = 0;
    place_.resize(static_cast<size_t>(model.num_units()));
    const int first = adapters ? model.base_units() : 0, last = adapters ? model.num_units() : model.base_units();
    for (int u = first; u < last; ++u)
      for (const ParamSpec& p : model.layout()[size_t(u)].params) {
        if (include && !include(p.hf_name)) {
          place_[size_t(u)].push_back({0, 0, false});  // another shard's
          continue;
        }
        const int64_t cols = shape_numel(p.shape) / p.shape[0];
        const std::string name = adapters ? peft_tensor_name(model, p) : p.hf_name;
        auto [it, added] = tensor_at.try_emplace(name, at);
        if (added) {
          std::vector<int64_t> shape = p.shape;
          shape[0] = p.hf_rows;
          if (p.hf_transposed) std::swap(shape[0], shape[1]);
          const uint64_t bytes = static_cast<uint64_t>(shape_numel(shape)) * es;
          header[name] = {{"dtype", type}, {"shape", shape}, {"data_offsets", {at, at + bytes}}};
          at += bytes;
        }
        const int64_t rows = std::clamp<int64_t>(p.hf_rows - p.row0, 0, p.shape[0]);
        place_[size_t(u)].push_back({it->second + static_cast<uint64_t>(p.row0 * cols) * es, rows, p.hf_transposed});
      }
    std::string text = header.dump();
    text.append((8 - (text.size() + 8) % 8) % 8, ' ');  // data starts 8-byte aligned
    const uint64_t n = text.size();
    file_->write_at(&n, sizeof n, 0);  // little-endian u64, as the format says (x86, aarch64)
    file_->write_at(text.data(), text.size(), sizeof n);
    base_ = sizeof n + n;
  }

  void write_unit(int u, const float* params) override {
    if (place_[size_t(u)].empty()) return;  // a unit this file does not hold
    const auto& ps = model_.layout()[size_t(u)].params;
    const size_t es = dtype_size(dtype_);
    for (size_t i = 0; i < ps.size(); ++i) {
      const ParamSpec& p = ps[i];
      const Place& place = place_[size_t(u)][i];
      const float* src = params + p.offset;
      const int64_t rows = place.rows, cols = shape_numel(p.shape) / p.shape[0];
      const size_t n = static_cast<size_t>(rows * cols);
      if (n == 0) continue;  // another shard's rows, or none below hf_rows: nothing to convert
      if (place.transposed) {  // (out, in) to Conv1D's (in, out)
        scratch_.resize(n);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) scratch_[size_t(c * rows + r)] = src[r * cols + c];
        src = scratch_.data();
      }
      out_.resize(n * es);
      cpu::cast(out_.data(), dtype_, src, DType::f32, n);
      file_->write_at(out_.data(), out_.size(), base_ + place.offset);
    }
  }

 private:
  struct Place {
    uint64_t offset;  // in the data
    int64_t rows;     // written: those below the tensor's hf_rows
    bool transposed;
  };
  const Model& model_;
  DType dtype_;
  uint64_t base_ = 0;
  std::vector<std::vector<Place>> place_;  // [unit][param]
  std::vector<float> scratch_;
  std::vector<char> out_;
};

// The bytes of each Hugging Face tensor in `dtype`, in the order the units first hold them.
std::vector<std::pair<std::string, uint64_t>> hf_tensor_bytes(const Model& model, DType dtype) {
  std::vector<std::pair<std::string, uint64_t>> out;
  std::map<std::string, bool> seen;
  for (int u = 0; u < model.base_units(); ++u)
    for (const ParamSpec& p : model.layout()[size_t(u)].params)
      if (seen.emplace(p.hf_name, true).second)
        out.emplace_back(p.hf_name, static_cast<uint64_t>(p.hf_rows * (shape_numel(p.shape) / p.shape[0])) * dtype_size(dtype));
  return out;
}

// A Hugging Face model folder: model.safetensors as above, or past `max_shard_bytes`
// model-0000k-of-0000n.safetensors with model.safetensors.index.json (save_pretrained's names and
// index), then config.json once the weights are complete, so transformers' from_pretrained(folder)
// reads it back.
class HfFolderWriter final : public ModelWriter {
 public:
  HfFolderWriter(const std::string& folder, const std::string& what, const Model& model, DType dtype,
                 uint64_t max_shard_bytes)
      : folder_(folder), what_(what), model_(model), dtype_(dtype) {
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) throw CheckpointError(what + ": cannot create folder '" + folder + "': " + ec.message());
    // Tensors in order, a new shard when the next would pass the limit (a tensor larger than the
    // limit gets a shard of its own, as save_pretrained does).
    std::vector<std::vector<std::string>> shards(1);
    uint64_t in_shard = 0, total = 0;
    for (const auto& [name, bytes] : hf_tensor_bytes(model, dtype)) {
      if (in_shard > 0 && in_shard + bytes > max_shard_bytes) shards.emplace_back(), in_shard = 0;
      shards.back().push_back(name);
      in_shard += bytes;
      total += bytes;
    }
    const size_t n = shards.size();
    nlohmann::json map = nlohmann::json::object();
    for (size_t k = 0; k < n; ++k) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, n);
      const std::string file = n == 1 ? "model.safetensors" : name;
      written_.insert(file);
      const std::set<std::string> mine(shards[k].begin(), shards[k].end());
      for (const std::string& t : shards[k]) map[t] = file;
      weights_.push_back(std::make_unique<SafetensorsWriter>((std::filesystem::path(folder) / file).string(), what, model,
                                                             dtype, [mine](const std::string& t) { return mine.count(t) > 0; }));
    }
    if (n > 1) index_ = nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", map}}.dump(2) + "\n";
  }
  void write_unit(int u, const float* params) override {
    for (auto& w : weights_) w->write_unit(u, params);
  }
  void finish() override {
    for (auto& w : weights_) w->finish();
    const std::filesystem::path dir(folder_);
    if (!index_.empty()) {
      write_atomically((dir / "model.safetensors.index.json").string(), index_);
      written_.insert("model.safetensors.index.json");
    }
    const char* torch_dtype = dtype_ == DType::f32 ? "float32" : dtype_ == DType::bf16 ? "bfloat16" : "float16";
    write_atomically((dir / "config.json").string(), hf_config_json(model_, torch_dtype));
    remove_earlier_weights();
  }

 private:
  // [Note: an export owns its folder's weights] A folder that held another model's weights (an
  // earlier export into it, sharded otherwise, or save_pretrained's) must not keep them beside the
  // new ones: a reader would take the old index and its shards (ztrain and transformers prefer an
  // index) or the old single file. Once the new files are in place, every weight file of
  // save_pretrained's names that this export did not write goes, as save_pretrained itself
  // clears a folder it saves into; nothing else in the folder is touched.
  void remove_earlier_weights() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(folder_, ec)) {
      const std::string name = e.path().filename().string();
      const bool weights = name == "model.safetensors" || name == "model.safetensors.index.json" ||
                           (name.starts_with("model-") && name.ends_with(".safetensors") && name.find("-of-") != name.npos);
      if (!weights || written_.count(name)) continue;
      std::error_code rm;
      if (!std::filesystem::remove(e.path(), rm) && rm)
        throw CheckpointError(what_ + ": cannot remove '" + e.path().string() +
                              "', an earlier model's weights beside the new ones: " + rm.message());
    }
  }

  std::string folder_, what_;
  const Model& model_;
  DType dtype_;
  std::vector<std::unique_ptr<ModelWriter>> weights_;
  std::string index_;
  std::set<std::string> written_;  // the weight files (and index) of this export
};

// PEFT's adapter folder (models/peft_format.hpp): adapter_model.safetensors, then adapter_config.json.
class PeftFolderWriter final : public ModelWriter {
 public:
  PeftFolderWriter(const std::string& folder, const std::string& what, const Model& model, DType dtype,
                   std::string base_model)
      : folder_(folder), model_(model), base_model_(std::move(base_model)) {
    if (!model.lora().enabled()) throw std::invalid_argument(what + ": the peft format holds LoRA adapters; this model has none");
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) throw CheckpointError(what + ": cannot create folder '" + folder + "': " + ec.message());
    weights_ = std::make_unique<SafetensorsWriter>((std::filesystem::path(folder) / "adapter_model.safetensors").string(),
                                                   what, model, dtype, nullptr, true);
  }
  void write_unit(int u, const float* params) override { weights_->write_unit(u, params); }
  void finish() override {
    weights_->finish();
    write_atomically((std::filesystem::path(folder_) / "adapter_config.json").string(), peft_config_json(model_, base_model_));
  }

 private:
  std::string folder_;
  const Model& model_;
  std::string base_model_;
  std::unique_ptr<ModelWriter> weights_;
};

}  // namespace

std::unique_ptr<ModelWriter> make_model_writer(const std::string& format, const std::string& path, const std::string& what,
                                               const Model& model, DType dtype, uint64_t max_shard_bytes,
                                               const std::string& base_model) {
  // One process writes the model; a killed earlier writer's temporary files go first ([Note:
  // replacing a file] in runtime/file_io.hpp). The folder formats write into `path` itself.
  const bool folder = format == "peft" || format == "hf";
  const std::string parent = std::filesystem::path(path).parent_path().string();
  remove_stale_temporaries(folder ? path : parent.empty() ? "." : parent);
  if (format == "peft") return std::make_unique<PeftFolderWriter>(path, what, model, dtype, base_model);
  if (format == "llmc") {
    if (dtype != DType::f32) throw std::invalid_argument("export: llm.c's format is fp32 only");
    check_llmc_model(model);
    return std::make_unique<LlmcWriter>(path, what, model);
  }
  if (format == "safetensors") return std::make_unique<SafetensorsWriter>(path, what, model, dtype);
  if (format == "hf") return std::make_unique<HfFolderWriter>(path, what, model, dtype, max_shard_bytes);
  throw std::invalid_argument("export: --format must be \"hf\", \"safetensors\", \"llmc\" or \"peft\", got \"" + format + "\"");
}

void write_gathered_model(ZeroEngine& engine, const Model& model, int rank, const std::string& format,
                          const std::string& path, const std::string& what, DType dtype) {
  // Rank 0's errors wait for the end of the gathers, which every rank must join.
  std::unique_ptr<ModelWriter> writer;
  std::exception_ptr error;
  auto guarded = [&](const std::function<void()>& f) {
    if (rank != 0 || error) return;
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  };
  guarded([&] { writer = make_model_writer(format, path, what, model, dtype); });
  // A LoRA model is written merged: its adapter units first (small), then each model unit with
  // its adapters merged in.
  const int base = model.base_units();
  std::vector<Tensor> adapters(static_cast<size_t>(model.num_units()));
  engine.for_each_full_unit(
      [&](int u) { adapters[size_t(u)] = host_f32(engine.units()[u].param_view()).to(cpu_allocator(), MemCategory::other); }, base);
  engine.for_each_full_unit(
      [&](int u) {
        guarded([&] {
          Tensor unit = host_f32(engine.units()[u].param_view());
          if (model.lora().enabled()) {
            unit = unit.to(cpu_allocator(), MemCategory::other);  // merged into a copy, not the run's own parameters
            model.merge_lora(u, unit.data<float>(), [&](int v) { return adapters[size_t(v)].data<float>(); });
          }
          writer->write_unit(u, unit.data<float>());
        });
      },
      0, base);
  guarded([&] { writer->finish(); });
  if (error) std::rethrow_exception(error);
}

}  // namespace zt
