// An llm.c checkpoint's header (and its size against it): dimensions, or a runtime_error naming the
// file.
#include <stdexcept>

#include "fuzz/fuzz_input.hpp"
#include "models/gpt2.hpp"
#include "models/llmc_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zt::fuzz::write_input("model.bin", data, size);
  try {
    zt::read_llmc_header(path);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
