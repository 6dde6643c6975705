#include "models/init.hpp"

#include <cmath>
#include <numbers>
#include <random>

namespace zt {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t mix_seed(uint64_t x) { return splitmix64(x); }

void fill_normal(float* x, size_t n, float std, uint64_t seed, uint64_t stream, size_t first) {
  std::mt19937_64 gen(splitmix64(seed ^ splitmix64(stream)));
  auto uniform = [&] { return (static_cast<double>(gen() >> 11) + 0.5) * 0x1.0p-53; };  // (0, 1)
  const size_t begin = first - first % 2, end = first + n;  // element i of the stream is x[i - first]
  gen.discard(begin);                                       // two uniforms per pair of elements
  for (size_t i = begin; i < end; i += 2) {
    // Box-Muller: two independent normals per pair of uniforms.
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double a = 2.0 * std::numbers::pi * uniform();
    if (i >= first) x[i - first] = static_cast<float>(std * r * std::cos(a));
    if (i + 1 < end) x[i + 1 - first] = static_cast<float>(std * r * std::sin(a));
  }
}

void fill_uniform(float* x, size_t n, float bound, uint64_t seed, uint64_t stream, size_t first) {
  std::mt19937_64 gen(splitmix64(seed ^ splitmix64(stream)));
  gen.discard(first);  // one draw per element
  for (size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;  // [0, 1)
    x[i] = static_cast<float>((2.0 * u - 1.0) * bound);
  }
}

}  // namespace zt
