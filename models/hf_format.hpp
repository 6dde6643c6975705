// Hugging Face model folders, the Llama family's native format: config.json (the architecture and
// its dimensions) and model.safetensors or a sharded model.safetensors.index.json, with Hugging
// Face's tensor names, which the model's ParamSpecs carry (hf_name). Reading goes through
// models/file_weights.hpp, so a rank reads only the byte ranges it asks for.
#pragma once

#include <memory>
#include <string>

#include "models/file_weights.hpp"
#include "models/model.hpp"
#include "files/tensor_file.hpp"

namespace zt {

// A folder holding config.json.
bool is_hf_folder(const std::string& path);

struct HfModel {
  std::string arch;  // ztrain's: the spec whose hf_architectures name config.json's (models/registry.hpp)
  ModelDims dims;
  std::string weights;  // model.safetensors or model.safetensors.index.json within the folder
};
// config.json's architecture and dimensions, in the hub's older keys (rope_theta, rope_scaling)
// or transformers 5's rope_parameters. std::runtime_error naming the file and key otherwise: an
// architecture ztrain does not train, an activation other than SiLU, biases it does not model, a
// RoPE scaling other than Llama 3.1's.
HfModel read_hf_config(const std::string& folder);

// The folder's tensors (one file or a sharded set).
std::unique_ptr<TensorFile> open_hf_weights(const HfModel& m);
// The Hugging Face names map, and the check that the file holds exactly the model's tensors
// (a tied head's lm_head.weight and RoPE's saved inv_freq buffers are ignored).
FileTensorMap hf_tensor_map();
void check_hf_tensors(const TensorFile& f, const Model& model, const std::string& folder);


}  // namespace zt
