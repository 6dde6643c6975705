// What the host holds across training steps, against what the tensors use ([Note: host block
// cache] in tensor/host_cache.hpp): after each step, the step's in-use peak (the metrics'
// peak_bytes.total), its reserved peak (in use plus the freed blocks the cache keeps), the blocks
// kept by size class, and the process's resident set (now and its high-water mark). One rank,
// the config's model and data. Driver: host_memory.sh.
//
//   host_cache CONFIG [STEPS] [--set dotted.key=value]...
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/train/memory_floor.hpp"
#include "runtime/train/trainer.hpp"
#include "tensor/allocator.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: host_cache CONFIG [STEPS] [--set dotted.key=value]...\n");
    return 2;
  }
  int steps = 3;
  std::vector<std::string> overrides;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--set" && i + 1 < argc) overrides.push_back(argv[++i]);
    else steps = std::stoi(a);
  }
  const double mib = 1 << 20;
  std::printf("before the trainer: resident %.1f MiB (high-water %.1f MiB)\n", zt::resident_bytes() / mib,
              zt::resident_peak_bytes() / mib);
  zt::Trainer trainer(zt::load_config(argv[1], overrides));
  for (int step = 1; step <= steps; ++step) {
    const zt::StepStats s = trainer.step();
    std::printf("step %d: in use at peak %.2f MiB (activations %.2f), reserved at peak %.2f MiB (+%.1f%%); resident %.1f "
                "MiB, high-water %.1f MiB\n",
                s.step, s.mem.total_peak / mib, s.mem.peak_of(zt::MemCategory::activations) / mib, s.mem.reserved_peak / mib,
                100.0 * (double(s.mem.reserved_peak) / double(s.mem.total_peak) - 1.0), zt::resident_bytes() / mib,
                s.rss_peak / mib);
    double kept = 0;
    std::string classes;
    for (const auto& [bytes, blocks] : zt::cpu_allocator().cached_blocks()) {
      kept += double(bytes) * double(blocks);
      char c[64];
      std::snprintf(c, sizeof c, " %zu x %zu KiB;", blocks, bytes >> 10);
      classes += c;
    }
    std::printf("  kept after the step: %.2f MiB in%s\n", kept / mib, classes.empty() ? " no block" : classes.c_str());
  }
  return 0;
}
