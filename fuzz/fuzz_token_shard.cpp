// An llm.c token shard: its header checked by the loader, then a few batches read, or a DataError.
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "runtime/data/data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zt::fuzz::write_input("shard_train_000.bin", data, size);
  zt::DataConfig cfg;
  cfg.format = "llmc";
  cfg.train = path;
  cfg.seq_len = 4;
  try {
    auto loader = zt::make_loader(cfg, zt::Split::train, 2, 4, 0, 1, 1);
    std::vector<int32_t> in(8), out(8);
    for (int i = 0; i < 3; ++i) loader->next(in.data(), out.data());
  } catch (const zt::DataError&) {
  }
  return 0;
}
