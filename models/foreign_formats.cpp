#include "models/foreign_formats.hpp"

#include "models/file_weights.hpp"
#include "models/gguf_format.hpp"
#include "models/hf_format.hpp"

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
