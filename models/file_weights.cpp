#include "models/file_weights.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

namespace zt {

namespace {
std::string shape_text(const Shape& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

// Elements [first, first + n) of tensor `name`, as read into v: all finite.
void check_finite(const TensorFile& f, const std::string& name, int64_t first, const float* v, int64_t n) {
  const float* bad = std::find_if(v, v + n, [](float x) { return !std::isfinite(x); });
  if (bad == v + n) return;
  const TensorFileEntry* e = f.find(name);
  throw std::runtime_error(non_finite_weight_text(e ? e->file : "", name, first + (bad - v), *bad));
}
}  // namespace

std::string non_finite_weight_text(const std::string& file, const std::string& tensor, int64_t element, float value) {
  return "'" + file + "': tensor '" + tensor + "' holds " + (std::isnan(value) ? "NaN" : value > 0 ? "inf" : "-inf") +
         " at element " + std::to_string(element) +
         ": the starting weights are not finite (a corrupt or diverged model); no step could train on them";
}

void check_file_tensors(const TensorFile& f, const Model& model, const FileTensorMap& map, const std::string& what,
                        const std::function<bool(const std::string&)>& ignored) {
  std::set<std::string> used;
  for (int u = 0; u < model.base_units(); ++u)  // a file holds the model's own units, not adapters
    for (const ParamSpec& p : model.layout()[size_t(u)].params) {
      const std::string name = map.name(p);
      used.insert(name);
      const TensorFileEntry* e = f.find(name);
      if (!e) throw std::runtime_error(what + ": tensor '" + name + "' is missing (the " + model.arch() + " model of " + dims_str(model.dims()) + " needs it)");
      Shape want = p.shape;
      if (p.hf_transposed) throw std::logic_error(name + ": transposed layouts are not read");
      want[0] = p.hf_rows;
      if (e->shape != want)
        throw std::runtime_error(what + ": tensor '" + name + "' in '" + e->file + "' has shape " + shape_text(e->shape) +
                                 ", the model's is " + shape_text(want));
    }
  for (const TensorFileEntry& e : f.entries())
    if (!used.count(e.name) && !ignored(e.name))
      throw std::runtime_error(what + ": tensor '" + e.name + "' in '" + e.file + "' is not part of the " + model.arch() +
                               " model of " + dims_str(model.dims()) + " (ztrain would train without it)");
}

void read_unit_range(const TensorFile& f, const Model& model, int u, int64_t begin, int64_t end, float* out,
                     const FileTensorMap& map) {
  const UnitLayout& lay = model.layout().at(static_cast<size_t>(u));
  for (const ParamSpec& p : lay.params) {
    const int64_t n = shape_numel(p.shape);
    const int64_t b = std::max(begin, p.offset), e = std::min(end, p.offset + n);
    if (b >= e) continue;
    const int64_t cols = p.shape.size() > 1 ? n / p.shape[0] : n;
    const std::string name = map.name(p);
    float* dst = out + (b - begin);
    // Rows of the model tensor covered, each read where the file keeps it (contiguous runs when
    // the map keeps the order).
    int64_t at = b - p.offset;  // within the parameter
    const int64_t stop = e - p.offset;
    while (at < stop) {
      const int64_t r = at / cols, c = at % cols;  // row within this parameter
      const int64_t model_row = p.row0 + (p.shape.size() > 1 ? r : 0);
      int64_t len = p.shape.size() > 1 ? std::min(stop - at, cols - c) : stop - at;
      if (p.shape.size() > 1 && model_row >= p.hf_rows) {
        std::fill_n(dst, len, 0.0f);  // a padded row
      } else if (p.shape.size() > 1 && !map.row) {
        // Whole rows in file order: one read up to the file's last row.
        const int64_t file_end = (p.hf_rows - p.row0) * cols;
        len = std::min(stop, file_end) - at;
        f.read_f32(name, p.row0 * cols + at, len, dst);
        check_finite(f, name, p.row0 * cols + at, dst, len);
      } else {
        const int64_t file_row = p.shape.size() > 1 ? map.row(p, model_row) : 0;
        const int64_t first = file_row * cols + (p.shape.size() > 1 ? c : at);
        f.read_f32(name, first, len, dst);
        check_finite(f, name, first, dst, len);
      }
      dst += len;
      at += len;
    }
  }
}

}  // namespace zt
