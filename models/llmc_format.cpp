// llm.c checkpoint files. [Note: units and llm.c's order] in gpt2.hpp says why the order on disk
// differs from the order in memory.
#include "models/llmc_format.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "models/file_weights.hpp"  // the message for a non-finite weight
#include "models/gpt2.hpp"  // the parameter count of a header's dimensions
#include "models/registry.hpp"

namespace zt {

namespace {

constexpr int32_t kMagic = 20240326;
constexpr int32_t kVersionF32 = 3;
constexpr size_t kHeaderInts = 256;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error("checkpoint '" + path + "': " + what);
}

}  // namespace

LlmcHeader llmc_header(const ModelDims& d) {
  LlmcHeader h{};
  h[0] = kMagic, h[1] = kVersionF32, h[2] = d.max_seq_len, h[3] = d.vocab_size, h[4] = d.n_layer, h[5] = d.n_head;
  h[6] = d.n_embd, h[7] = d.padded_vocab_size;
  return h;
}

void check_llmc_model(const Model& model) {
  if (!model_spec(model.arch()).llmc)
    throw std::invalid_argument("llm.c's checkpoint format holds GPT-2 only, not a model of arch \"" + model.arch() +
                                "\"");
}

std::string llmc_arch() {
  for (const ModelSpec& s : model_specs())
    if (s.llmc) return s.arch;
  throw std::logic_error("no architecture is llm.c's");
}

ModelDims read_llmc_header(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) throw file_error(path, std::string("cannot open: ") + std::strerror(errno));
  int32_t h[kHeaderInts];
  if (std::fread(h, sizeof(int32_t), kHeaderInts, f.get()) != kHeaderInts)
    throw file_error(path, "truncated header (shorter than 1024 bytes)");
  if (h[0] != kMagic)
    throw file_error(path, "bad magic number " + std::to_string(h[0]) + " (an llm.c checkpoint has " + std::to_string(kMagic) + ")");
  if (h[1] != kVersionF32)
    throw file_error(path, "unsupported version " + std::to_string(h[1]) + " (only version 3, fp32, is read)");
  ModelDims d = gpt2_dims(h[2], h[3], h[7], h[4], h[5], h[6]);
  if (d.max_seq_len < 1 || d.vocab_size < 1 || d.n_layer < 1 || d.n_head < 1 || d.n_embd < 1 ||
      d.padded_vocab_size < d.vocab_size || d.n_embd % d.n_head)
    throw file_error(path, "impossible dimensions in header: " + dims_str(d));
  // Counted in floating point first: the int64 count of absurd dimensions would overflow.
  const double params = gpt2_num_params_f64(d);
  if (params > 1e13) {
    char n[32];
    std::snprintf(n, sizeof n, "%.3g", params);
    throw file_error(path, std::string("dimensions in header describe ") + n + " parameters: " + dims_str(d));
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const auto want = kHeaderInts * 4 + static_cast<uintmax_t>(gpt2_num_params(d)) * 4;
  if (ec || size != want)
    throw file_error(path, "size " + std::to_string(size) + " bytes, but its header describes " + std::to_string(want) +
                               " (truncated or not an llm.c fp32 checkpoint)");
  return d;
}

void load_llmc_checkpoint(const std::string& path, Model& model) {
  check_llmc_model(model);
  const ModelDims d = read_llmc_header(path);
  if (!(d == model.dims()))
    throw file_error(path, "holds a model of " + dims_str(d) + ", but the model is " + dims_str(model.dims()));
  File f(std::fopen(path.c_str(), "rb"));
  if (!f || std::fseek(f.get(), kHeaderInts * 4, SEEK_SET) != 0) throw file_error(path, "cannot read parameters");
  model.for_each_param_in_file_order([&](int u, int i) {
    const Tensor& t = model.param(u, i);
    const bool direct = t.device() == Device::cpu && t.dtype() == DType::f32;
    const Tensor host = direct ? t : Tensor::empty(t.shape(), DType::f32, MemCategory::other);
    if (std::fread(host.data<float>(), sizeof(float), static_cast<size_t>(t.numel()), f.get()) != static_cast<size_t>(t.numel()))
      throw file_error(path, "read failed in the parameters");
    // [Note: finite starting weights] in models/file_weights.hpp
    const float* v = host.data<float>();
    const float* bad = std::find_if(v, v + t.numel(), [](float x) { return !std::isfinite(x); });
    if (bad != v + t.numel()) {
      const ParamSpec& p = model.layout()[size_t(u)].params[size_t(i)];
      throw std::runtime_error(non_finite_weight_text(path, p.layer < 0 ? p.name : p.name + " of layer " + std::to_string(p.layer),
                                                      bad - v, *bad));
    }
    if (!direct) store_f32(t, host);
  });
}

void save_llmc_checkpoint(const std::string& path, const Model& model) {
  check_llmc_model(model);
  // Written to a temporary name and renamed, so a failed or interrupted save never leaves a
  // truncated file under the final name.
  const std::string tmp = path + ".tmp";
  {
    File f(std::fopen(tmp.c_str(), "wb"));
    if (!f) throw file_error(path, std::string("cannot create: ") + std::strerror(errno));
    const LlmcHeader h = llmc_header(model.dims());
    bool ok = std::fwrite(h.data(), sizeof(int32_t), kHeaderInts, f.get()) == kHeaderInts;
    model.for_each_param_in_file_order([&](int u, int i) {
      const Tensor t = host_f32(model.param(u, i));
      ok = ok && std::fwrite(t.data<float>(), sizeof(float), static_cast<size_t>(t.numel()), f.get()) ==
                     static_cast<size_t>(t.numel());
    });
    ok = ok && std::fflush(f.get()) == 0 && fsync(fileno(f.get())) == 0;
    if (!ok) {
      const int e = errno;
      f.reset();
      std::remove(tmp.c_str());
      throw file_error(path, std::string("write failed: ") + std::strerror(e));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw file_error(path, std::string("rename failed: ") + std::strerror(e));
  }
}

}  // namespace zt
