// Element types and the conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace brigade {

// f8e4m3: OCP FP8 E4M3 ("e4m3fn": no infinities, max 448, NaN = S.1111.111), the element type of
// fp8-quantized weight matrices on GPUs that multiply it natively (compute capability >= 8.9);
// such a weight carries its scale with it (core/backend.h, "fp8 weights").
enum class DType : uint8_t { f32, f16, bf16, i32, i64, i8, u8, f8e4m3 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::i64: return 8;
    case DType::i8: case DType::u8: case DType::f8e4m3: return 1;
  }
  return 0;
}

const char* dtype_name(DType t);
// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16", "i32", "i64", "i8", "u8",
// "f8e4m3"/"fp8".
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

// FP8 E4M3 <-> f32, as the GPU converts (cuda_fp8.h with __NV_SATFINITE): round to nearest even,
// magnitudes beyond 448 saturate to +-448, NaN stays NaN (0x7f / 0xff). The host reference of the
// fp8 GEMM's quantization (tests/gpu) uses these.
float e4m3_to_f32(uint8_t q);
uint8_t f32_to_e4m3(float f);
constexpr float kE4m3Max = 448.0f;

}  // namespace brigade
