// The model a LoRA checkpoint's adapters adapt, with them merged in ([Note: LoRA units] in
// models/lora.hpp): its frozen model read again from the run's model.init_from (a foreign file a
// unit at a time; an llm.c or ztrain checkpoint whole) or initialised from its train.seed,
// rounded through the run's wire dtype as the run held it, and checked against the checksum the
// checkpoint recorded ([Note: frozen units' checksum] in checkpoint.cpp). For `ztrain export
// --merge-lora` and for anything that reads a LoRA checkpoint's weights (`ztrain sample`).
#pragma once

#include <functional>

#include "models/model.hpp"
#include "runtime/checkpoint/checkpoint.hpp"

namespace zt {

// Calls write(u, params) for each model unit u of `model` (the checkpoint's model with its lora()
// applied; its units may be bound to host memory here), params its merged flat buffer (f32, host,
// valid during the call); then CheckpointError unless the frozen model read was the one the
// adapters were trained on. A caller that commits what it wrote does so only after this returns.
void for_each_merged_unit(SavedCheckpoint& saved, Model& model, const std::function<void(int u, const float* params)>& write);

}  // namespace zt
