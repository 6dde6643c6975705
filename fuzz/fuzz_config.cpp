// The config parser: JSON text to a validated Config, or a ConfigError.
#include "fuzz/fuzz_input.hpp"
#include "runtime/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zt::fuzz::write_input("config.json", data, size);
  try {
    zt::load_config(path, {});
  } catch (const zt::ConfigError&) {
  }
  return 0;
}
