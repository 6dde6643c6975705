// Element types and the scalar conversions between them. Conversions round to nearest even, as
// the hardware does, so CPU results can be compared bit for bit with CUDA ones.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zt {

enum class DType : uint8_t { f32, bf16, f16, i32, u16 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: case DType::u16: return 2;
  }
  return 0;
}

std::string_view dtype_name(DType t);
// Parses "f32", "bf16", "f16", "i32", "u16"; throws std::invalid_argument naming the text.
DType dtype_from_name(std::string_view name);

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace zt
