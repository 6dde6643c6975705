#include "models/foreign_formats.hpp"

#include <filesystem>
#include <stdexcept>

#include "models/file_weights.hpp"
#include "models/gguf_format.hpp"
#include "models/hf_format.hpp"
#include "files/safetensors_file.hpp"

namespace zt {

namespace {

class FileWeights final : public ForeignWeights {
 public:
  FileWeights(std::unique_ptr<TensorFile> f, FileTensorMap map, const Model& model)
      : file_(std::move(f)), map_(std::move(map)), model_(model) {}
  void read_unit_range(int u, int64_t begin, int64_t end, float* out) const override {
    zt::read_unit_range(*file_, model_, u, begin, end, out, map_);
  }

 private:
  std::unique_ptr<TensorFile> file_;
  FileTensorMap map_;
  const Model& model_;
};

}  // namespace

std::optional<ForeignCheckpoint> read_foreign_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw std::runtime_error("checkpoint '" + path + "': cannot open: it does not exist");
  // A file of a Hugging Face folder given for the folder would otherwise be read as llm.c's
  // format ("bad magic number"): recognised by its content, and the folder named.
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  if (std::filesystem::is_regular_file(p, ec) &&
      (is_safetensors_file(path) || name == "config.json" || name.ends_with(".safetensors.index.json"))) {
    const std::string folder = p.parent_path().empty() ? "." : p.parent_path().string();
    throw std::runtime_error("'" + path + "' is " + (is_safetensors_file(path) ? "a safetensors file" : "a file of a Hugging Face model folder") +
                             ": give the Hugging Face folder that holds it with its config.json ('" + folder + "'" +
                             (is_hf_folder(folder) ? "" : ", which has no config.json: `ztrain export --format hf` writes a whole folder") +
                             ")");
  }
  if (is_hf_folder(path)) {
    const HfModel m = read_hf_config(path);
    return ForeignCheckpoint{"hf", m.arch, m.dims};
  }
  if (is_gguf_file(path)) {
    const GgufModel m = read_gguf_model(*GgufFile::open(path));
    return ForeignCheckpoint{"gguf", m.arch, m.dims};
  }
  return std::nullopt;
}

std::unique_ptr<ForeignWeights> open_foreign_weights(const std::string& path, const Model& model) {
  if (is_hf_folder(path)) {
    const HfModel m = read_hf_config(path);
    std::unique_ptr<TensorFile> f = open_hf_weights(m);
    check_hf_tensors(*f, model, path);
    return std::make_unique<FileWeights>(std::move(f), hf_tensor_map(), model);
  }
  std::unique_ptr<GgufFile> f = GgufFile::open(path);
  const GgufModel m = read_gguf_model(*f);
  check_gguf_tensors(*f, m, model);
  FileTensorMap map = gguf_tensor_map(m);
  return std::make_unique<FileWeights>(std::move(f), std::move(map), model);
}

}  // namespace zt
