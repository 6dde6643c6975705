#include "models/init.hpp"

#include <cmath>
#include <numbers>
#include <random>

namespace zt {

void fill_normal(float* x, size_t n, float std, uint64_t seed, uint64_t stream, size_t first) {
  std::mt19937_64 gen(mix_seed(seed ^ mix_seed(stream)));
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
  std::mt19937_64 gen(mix_seed(seed ^ mix_seed(stream)));
  gen.discard(first);  // one draw per element
  for (size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;  // [0, 1)
    x[i] = static_cast<float>((2.0 * u - 1.0) * bound);
  }
}

}  // namespace zt
