// A model's parameters read from a foreign checkpoint's tensors (files/tensor_file.hpp): the
// format's adapter (models/hf_format.cpp, models/gguf_format.cpp) says which file tensor holds each
// ParamSpec and, where the format stores rows in another order, which file row holds each model
// row; this reads any element range of a unit through that map, so a rank can read only its shard.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "models/model.hpp"
#include "files/tensor_file.hpp"

namespace zt {

struct FileTensorMap {
  // The file's name for the model tensor `p` belongs to.
  std::function<std::string(const ParamSpec& p)> name;
  // The file row holding row r of that model tensor (r counts from the tensor's first row, not
  // the unit's row0); empty: the same row.
  std::function<int64_t(const ParamSpec& p, int64_t r)> row;
};

// Every parameter's tensor is in the file with the shape the model expects (hf_rows rows of a
// padded table); std::runtime_error naming the file and the tensor otherwise. Then every tensor of
// the file is one the model reads or one `ignored` accepts: a file holding weights the model
// would drop (an MLP bias, an o_proj bias) is refused by name rather than silently trained without.
void check_file_tensors(const TensorFile& f, const Model& model, const FileTensorMap& map, const std::string& what,
                        const std::function<bool(const std::string&)>& ignored);

// Elements [begin, end) of unit u's flat buffer, in f32, into out[0, end - begin): the padded
// vocabulary's rows beyond the file's as zeros. [Note: finite starting weights] An inf or NaN read
// is a std::runtime_error naming the file, the tensor and the element: checked as it is read (a
// pass over bytes already in cache), rather than found as a NaN loss at step 1 that blames the
// learning rate for weights no update has touched.
void read_unit_range(const TensorFile& f, const Model& model, int u, int64_t begin, int64_t end, float* out,
                     const FileTensorMap& map);

// The message for a non-finite starting weight, [Note: finite starting weights].
std::string non_finite_weight_text(const std::string& file, const std::string& tensor, int64_t element, float value);

}  // namespace zt
