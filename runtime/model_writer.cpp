#include "runtime/model_writer.hpp"

#include <fcntl.h>

#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/cpu/kernels.hpp"
#include "runtime/file_io.hpp"

namespace zt {

namespace {

// Hugging Face's name for each llm.c block tensor, and whether it is a Conv1D weight (stored
// transposed).
const std::map<std::string, std::pair<std::string, bool>> kBlockNames = {
    {"ln1w", {"ln_1.weight", false}},         {"ln1b", {"ln_1.bias", false}},
    {"qkvw", {"attn.c_attn.weight", true}},   {"qkvb", {"attn.c_attn.bias", false}},
    {"attprojw", {"attn.c_proj.weight", true}}, {"attprojb", {"attn.c_proj.bias", false}},
    {"ln2w", {"ln_2.weight", false}},         {"ln2b", {"ln_2.bias", false}},
    {"fcw", {"mlp.c_fc.weight", true}},       {"fcb", {"mlp.c_fc.bias", false}},
    {"fcprojw", {"mlp.c_proj.weight", true}}, {"fcprojb", {"mlp.c_proj.bias", false}}};

// A file written at known offsets under a temporary name, renamed into place by finish() ([Note:
// replacing a file] in runtime/file_io.hpp); a writer destroyed before finish() leaves nothing.
class PositionedWriter : public ModelWriter {
 protected:
  PositionedWriter(const std::string& path, const std::string& what) : out_(path, what), file_(&out_.file()) {}
  void finish() override { out_.commit(); }
  ReplacedFile out_;
  CheckpointFile* file_;
};

// llm.c's layout: 256 int32 of header, then each parameter kind for all layers together ([Note:
// units and llm.c's order] in models/gpt2.hpp), so a unit's tensors land at scattered offsets.
class LlmcWriter final : public PositionedWriter {
 public:
  LlmcWriter(const std::string& path, const std::string& what, const GPT2& model)
      : PositionedWriter(path, what), model_(model) {
    const GPT2Dims& d = model.dims();
    int32_t h[256] = {};
    h[0] = 20240326, h[1] = 3, h[2] = d.max_seq_len, h[3] = d.vocab_size, h[4] = d.n_layer, h[5] = d.n_head;
    h[6] = d.n_embd, h[7] = d.padded_vocab_size;
    file_->write_at(h, sizeof h, 0);
    uint64_t at = sizeof h;
    offsets_.resize(static_cast<size_t>(model.num_units()));
    for (int u = 0; u < model.num_units(); ++u) offsets_[size_t(u)].resize(model.layout()[size_t(u)].params.size());
    for_each_llmc_param(model, [&](int u, int i) {
      offsets_[size_t(u)][size_t(i)] = at;
      at += static_cast<uint64_t>(shape_numel(model.layout()[size_t(u)].params[size_t(i)].shape)) * sizeof(float);
    });
  }
  void write_unit(int u, const float* params) override {
    const auto& ps = model_.layout()[size_t(u)].params;
    for (size_t i = 0; i < ps.size(); ++i)
      file_->write_at(params + ps[i].offset, static_cast<size_t>(shape_numel(ps[i].shape)) * sizeof(float),
                      offsets_[size_t(u)][i]);
  }

 private:
  const GPT2& model_;
  std::vector<std::vector<uint64_t>> offsets_;  // [unit][param]
};

class SafetensorsWriter final : public PositionedWriter {
 public:
  SafetensorsWriter(const std::string& path, const std::string& what, const GPT2& model, DType dtype)
      : PositionedWriter(path, what), model_(model), dtype_(dtype) {
    const GPT2Dims& d = model.dims();
    const size_t es = dtype_size(dtype);
    const char* type = dtype == DType::f32 ? "F32" : dtype == DType::bf16 ? "BF16" : "F16";
    // Tensors in model order; wte's row ranges (and wpe) come from the first K units.
    nlohmann::json header = nlohmann::json::object();
    header["__metadata__"] = {{"format", "pt"}, {"producer", "ztrain"}};
    uint64_t at = 0;
    auto add = [&](const std::string& name, std::vector<int64_t> shape) {
      const uint64_t bytes = static_cast<uint64_t>(shape_numel(shape)) * es;
      header[name] = {{"dtype", type}, {"shape", shape}, {"data_offsets", {at, at + bytes}}};
      at += bytes;
      return at - bytes;
    };
    wte_ = add("wte.weight", {d.vocab_size, d.n_embd});
    wpe_ = add("wpe.weight", {d.max_seq_len, d.n_embd});
    place_.resize(static_cast<size_t>(model.num_units()));
    for (int u = model.wte_units(); u < model.num_units(); ++u)
      for (const ParamSpec& p : model.layout()[size_t(u)].params) {
        std::string name;
        bool transposed = false;
        if (p.layer >= 0) {
          const auto& [hf, t] = kBlockNames.at(p.name);
          name = "h." + std::to_string(p.layer) + "." + hf;
          transposed = t;
        } else {
          name = p.name == "lnfw" ? "ln_f.weight" : "ln_f.bias";
        }
        std::vector<int64_t> shape = p.shape;
        if (transposed) std::swap(shape[0], shape[1]);
        place_[size_t(u)].push_back({add(name, shape), transposed});
      }
    std::string text = header.dump();
    text.append((8 - (text.size() + 8) % 8) % 8, ' ');  // data starts 8-byte aligned
    const uint64_t n = text.size();
    file_->write_at(&n, sizeof n, 0);  // little-endian u64, as the format says (x86, aarch64)
    file_->write_at(text.data(), text.size(), sizeof n);
    base_ = sizeof n + n;
  }

  void write_unit(int u, const float* params) override {
    const GPT2Dims& d = model_.dims();
    const auto& ps = model_.layout()[size_t(u)].params;
    const size_t es = dtype_size(dtype_);
    for (size_t i = 0; i < ps.size(); ++i) {
      const ParamSpec& p = ps[i];
      const float* src = params + p.offset;
      int64_t rows = p.shape[0], cols = shape_numel(p.shape) / p.shape[0];
      uint64_t at;
      if (u < model_.wte_units()) {
        if (p.name == "wpe") {
          at = wpe_;
        } else {  // wte rows [row0, row0 + rows), those below vocab_size
          rows = std::max<int64_t>(0, std::min<int64_t>(rows, d.vocab_size - p.row0));
          at = wte_ + static_cast<uint64_t>(p.row0 * cols) * es;
        }
      } else {
        at = place_[size_t(u)][i].offset;
      }
      const size_t n = static_cast<size_t>(rows * cols);
      const bool transposed = u >= model_.wte_units() && place_[size_t(u)][i].transposed;
      if (transposed) {  // llm.c's (out, in) to Conv1D's (in, out)
        scratch_.resize(n);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) scratch_[size_t(c * rows + r)] = src[r * cols + c];
        src = scratch_.data();
      }
      out_.resize(n * es);
      cpu::cast(out_.data(), dtype_, src, DType::f32, n);
      if (n) file_->write_at(out_.data(), out_.size(), base_ + at);
    }
  }

 private:
  struct Place {
    uint64_t offset;
    bool transposed;
  };
  const GPT2& model_;
  DType dtype_;
  uint64_t wte_ = 0, wpe_ = 0, base_ = 0;
  std::vector<std::vector<Place>> place_;  // [unit][param] for units past the embedding's
  std::vector<float> scratch_;
  std::vector<char> out_;
};

}  // namespace

std::unique_ptr<ModelWriter> make_model_writer(const std::string& format, const std::string& path, const std::string& what,
                                               const GPT2& model, DType dtype) {
  if (format == "llmc") {
    if (dtype != DType::f32) throw std::invalid_argument("export: llm.c's format is fp32 only");
    return std::make_unique<LlmcWriter>(path, what, model);
  }
  if (format == "safetensors") return std::make_unique<SafetensorsWriter>(path, what, model, dtype);
  throw std::invalid_argument("export: --format must be \"safetensors\" or \"llmc\", got \"" + format + "\"");
}

void write_gathered_model(ZeroEngine& engine, const GPT2& model, int rank, const std::string& format,
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
  engine.for_each_full_unit(
      [&](int u) { guarded([&] { writer->write_unit(u, host_f32(engine.units()[u].param_view()).data<float>()); }); });
  guarded([&] { writer->finish(); });
  if (error) std::rethrow_exception(error);
}

}  // namespace zt
