// `ztrain export`: a sharded checkpoint as one model file ([Note: export formats] in
// runtime/checkpoint/model_writer.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace zt {

// `ztrain export`: the checkpoint in `dir` (a folder or root), every region it reads checked
// against its checksum, as one file. The fp32 master weights are what is written. An `out` inside
// the checkpoint (or its root's `latest`) is refused before anything is written.
// `max_shard_bytes`: the "hf" format's largest weights file (make_model_writer). A LoRA run's
// checkpoint ([Note: LoRA units] in models/lora.hpp) exports as "peft" (its adapters), or with
// `merge_lora` as the model it adapts with the adapters merged in, the frozen model read again from
// the run's model.init_from (or its seed) and checked against the checksum the checkpoint holds.
void export_checkpoint(const std::string& dir, const std::string& format, const std::string& out,
                       uint64_t max_shard_bytes = 5'000'000'000, bool merge_lora = false);

}  // namespace zt
