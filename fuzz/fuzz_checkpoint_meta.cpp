// A checkpoint's meta.json: read and checked by SavedCheckpoint, or a CheckpointError.
#include "fuzz/fuzz_input.hpp"
#include "runtime/checkpoint/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zt::fuzz::write_input("meta.json", data, size);
  try {
    zt::SavedCheckpoint saved(zt::fuzz::scratch());
  } catch (const zt::CheckpointError&) {
  }
  return 0;
}
