// The CUDA kernel tests' main: exit 77 (skipped) where this process sees no CUDA device, never a
// pass; otherwise doctest runs every test case on device 0.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "tensor/cuda_allocator.hpp"

int main(int argc, char** argv) {
  if (!zt::cuda_device_available()) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
