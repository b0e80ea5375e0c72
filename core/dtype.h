// Element types and the conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace brigade {

enum class DType : uint8_t { f32, f16, bf16, i32, i64, i8, u8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::i64: return 8;
    case DType::i8: case DType::u8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t);
// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16", "i32", "i64", "i8", "u8".
std::optional<DType> parse_dtype(std::string_view name);

// bf16 <-> f32. Rounding is round-to-nearest-even; NaN stays NaN.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE half <-> f32 (portable; the CPU backend uses F16C where it can).
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace brigade
