// A model's starting weights (`ztrain sample --checkpoint`, `model.init_from`): an llm.c
// checkpoint file, or a ztrain checkpoint (a step_<k> folder, or a checkpoint root naming its
// `latest`), whose fp32 master weights are read as `ztrain export` reads them, every region
// checked against its checksum, at whatever world size, stage and wte_units it was saved.
#pragma once

#include <string>

#include "models/model.hpp"
#include "runtime/zero/engine.hpp"

namespace zt {

// The architecture and dimensions of the model stored at `path`. An error naming the path when it
// is neither an llm.c checkpoint nor a ztrain checkpoint (a folder that is not one says so).
struct StoredModel {
  std::string arch;
  ModelDims dims;
  // Where its tokenizer is: the file or folder itself when it carries one (GGUF, a Hugging Face
  // folder with tokenizer.json), the one a ztrain checkpoint's run recorded; "" when unknown.
  std::string tokenizer;
};
StoredModel stored_model(const std::string& path);

// Fills every parameter `model` has bound (on any device and in any dtype) from `path`, whose
// dimensions must be the model's. A unit at a time for a ztrain checkpoint.
void load_weights(const std::string& path, Model& model);

// The run's starting weights into the engine's units. A foreign checkpoint (a Hugging Face folder,
// a GGUF file) is read a unit at a time, each rank reading only the byte ranges of the elements it
// keeps (its shard at stage 3): no rank ever holds the whole model, [Note: loading a shard].
// Other files go through load_weights with every unit's full parameters present. Adapter units
// ([Note: LoRA units] in models/lora.hpp) are in no file: they start from the model's init with `seed`.
void load_weights_into(const std::string& path, Model& model, ZeroEngine& engine, uint64_t seed);

}  // namespace zt
