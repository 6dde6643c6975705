// One consolidated model file, written a unit at a time, so no process holds more than one unit's
// parameters beyond its shard: from a sharded checkpoint (`ztrain export`, runtime/checkpoint/export.hpp) or
// from a run's gathered units (train.save_model, stage3_gather_16bit_weights_on_model_save).
//
// [Note: export formats] "llmc": llm.c's fp32 checkpoint (its header and parameter order, the
// padded vocabulary included), which `ztrain sample`, `--init-from` and llm.c read. "safetensors":
// Hugging Face's GPT-2 names and layout (wte.weight with vocab_size rows, wpe.weight,
// h.<l>.ln_1.weight, h.<l>.attn.c_attn.weight, ...; Conv1D weights stored (in, out), i.e.
// transposed from llm.c's (out, in)), in F32, BF16 or F16.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/model.hpp"
#include "runtime/zero/engine.hpp"
#include "tensor/dtype.hpp"

namespace zt {

class ModelWriter {
 public:
  virtual ~ModelWriter() = default;
  // Unit u's parameters (its flat buffer, layout()[u].numel floats), written where they belong.
  virtual void write_unit(int u, const float* params) = 0;
  // After every unit: fsynced and renamed into place (until then the file has a temporary name).
  virtual void finish() = 0;
};

// `format` "llmc" (f32 only), "safetensors", or "hf" (a folder: config.json and the weights,
// split into files of at most `max_shard_bytes` with an index past that, as Hugging Face's
// save_pretrained splits at 5 GB); `model` gives the layout and outlives the writer. The file
// replaces `path` when finished ([Note: replacing a file] in runtime/file_io.hpp); `what` names it
// in errors ("export --out", "train.save_model").
inline constexpr uint64_t kHfMaxShardBytes = 5'000'000'000;
// "peft": PEFT's adapter folder of a LoRA model (models/peft_format.hpp), naming `base_model` as
// its base; only the adapter units are written. The other formats write the model's own units.
std::unique_ptr<ModelWriter> make_model_writer(const std::string& format, const std::string& path, const std::string& what,
                                               const Model& model, DType dtype = DType::f32,
                                               uint64_t max_shard_bytes = kHfMaxShardBytes,
                                               const std::string& base_model = "");

// The run's model as one file, gathered a unit at a time (ZeroEngine::for_each_full_unit, so
// collective at stages 1-3) and written by rank 0; a LoRA model with its adapters merged in. A write error on rank 0 is thrown there once
// every rank has joined the last gather; the other ranks return.
void write_gathered_model(ZeroEngine& engine, const Model& model, int rank, const std::string& format,
                          const std::string& path, const std::string& what, DType dtype);

}  // namespace zt
