#include "tensor/dtype.hpp"

#include <stdexcept>
#include <string>

namespace zt {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::u16: return "u16";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u16})
    if (dtype_name(t) == name) return t;
  throw std::invalid_argument("unknown dtype '" + std::string(name) + "' (expected f32, bf16, f16, i32 or u16)");
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (absu < 0x38800000u) {
    // Subnormal half (or zero): add 0.5 so the FPU's own round-to-nearest-even does the work.
    const float a = std::bit_cast<float>(absu) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(a) - 0x3f000000u));
  }
  uint32_t v = absu - 0x38000000u;  // rebias exponent 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in f32.
    const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -mag : mag;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

}  // namespace zt
