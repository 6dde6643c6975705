// Reproducible initialisation: std::normal_distribution differs between standard libraries, so
// the normal draws are made here from mt19937_64, whose sequence the standard fixes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zt {

// Fills x[0..n) with elements [first, first+n) of normal(0, std) from the stream (seed, stream):
// each tensor has its own stream, so the values do not depend on which other tensors were
// initialised first, and a part of a tensor (`first` > 0) gets the values the whole would have.
void fill_normal(float* x, size_t n, float std, uint64_t seed, uint64_t stream, size_t first = 0);

// splitmix64: a 64-bit seed mixed well enough to start a stream from (inline: checksums call it
// per element).
inline uint64_t mix_seed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The same for uniform(-bound, bound), one draw per element.
void fill_uniform(float* x, size_t n, float bound, uint64_t seed, uint64_t stream, size_t first = 0);

}  // namespace zt
