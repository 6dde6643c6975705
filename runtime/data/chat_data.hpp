// Instruction data (`data.format: "chat"`): JSON-lines conversations, rendered with a named chat
// template (runtime/text/chat_template.hpp), tokenized at load, and trained on the assistant's
// tokens only.
//
// [Note: chat rows] A line is one conversation, in any of the three shapes users bring:
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}  (OpenAI, ms-swift)
//   {"query": "...", "response": "...", "system"?: "...", "history"?: [["q", "r"], ...]}  (ms-swift)
//   {"instruction": "...", "input"?: "...", "output": "...", "system"?: "..."}  (alpaca)
// A target is trained when the token it predicts belongs to an assistant turn's content or its
// end-of-turn token; every other target is -1, which the loss leaves out of its sum and its mean.
// Without packing each conversation is a row of seq_len+1 tokens, padded (padding is never
// trained); one longer than that is a bad line. With `data.packing` whole conversations are laid
// one after another into rows in order (first fit), and one longer than a row is cut to a row
// (counted as truncated). Bad lines (not JSON, no conversation, a message without role or
// content, an unknown role, no or an empty assistant turn, too long without packing) are counted
// and reported with file:line, and skipped; a split with no usable conversation is an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config.hpp"

namespace zt {

class DataLoader;
enum class Split;

// One split's chat loader (make_loader dispatches here for format "chat"); Split::val reads
// data.val, or without it the last data.val_fraction of the training conversations, which
// Split::train then leaves out and Split::all keeps.
std::unique_ptr<DataLoader> make_chat_loader(const DataConfig& cfg, Split split, int B, int T, int rank, int world_size,
                                             uint64_t seed, bool shuffle);

}  // namespace zt
