#include "core/dtype.h"

#include <cmath>

namespace brigade {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::f8e4m3: return "f8e4m3";
    case DType::q8_0: return "q8_0";
    case DType::q4_0: return "q4_0";
    case DType::q4_1: return "q4_1";
    case DType::q4_k: return "q4_k";
    case DType::q5_k: return "q5_k";
    case DType::q6_k: return "q6_k";
    case DType::mxfp4: return "mxfp4";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "f32" || n == "float32" || n == "F32") return DType::f32;
  if (n == "f16" || n == "float16" || n == "F16") return DType::f16;
  if (n == "bf16" || n == "bfloat16" || n == "BF16") return DType::bf16;
  if (n == "i32" || n == "int32" || n == "I32") return DType::i32;
  if (n == "i64" || n == "int64" || n == "I64") return DType::i64;
  if (n == "i8" || n == "int8" || n == "I8") return DType::i8;
  if (n == "u8" || n == "uint8" || n == "U8") return DType::u8;
  if (n == "f8e4m3" || n == "fp8") return DType::f8e4m3;
  if (n == "q8_0" || n == "Q8_0") return DType::q8_0;
  if (n == "q4_0" || n == "Q4_0") return DType::q4_0;
  if (n == "q4_1" || n == "Q4_1") return DType::q4_1;
  if (n == "q4_k" || n == "Q4_K") return DType::q4_k;
  if (n == "q5_k" || n == "Q5_K") return DType::q5_k;
  if (n == "q6_k" || n == "Q6_K") return DType::q6_k;
  if (n == "mxfp4" || n == "MXFP4") return DType::mxfp4;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) { man <<= 1; --exp; }
      man &= 0x3ffu;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((u >> 23) & 0xffu) - 127 + 15;
  uint32_t man = u & 0x7fffffu;
  if (((u >> 23) & 0xffu) == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exponent: correct
  return static_cast<uint16_t>(half);
}

float e4m3_to_f32(uint8_t q) {
  const float sign = (q & 0x80u) ? -1.0f : 1.0f;
  const int exp = (q >> 3) & 0xf, man = q & 0x7;
  if (exp == 0xf && man == 0x7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -9);  // subnormal: man * 2^-9
  return sign * std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
}

uint8_t f32_to_e4m3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80u : 0x00u;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | 0x7fu);
  const float a = std::fabs(f);
  if (a >= kE4m3Max) return static_cast<uint8_t>(sign | 0x7eu);
  // Codes are monotonic in the magnitude: below 2^-6 the code is the count of 2^-9 steps (code 8
  // is the smallest normal, 2^-6), so rounding a * 2^9 gives the code directly.
  if (a < 0.015625f) return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f)));
  int ex = 0;
  const float fr = std::frexp(a, &ex);                 // a = fr * 2^ex, fr in [0.5, 1)
  int e = ex - 1;                                      // a = (2 fr) * 2^e, e in [-6, 8]
  int m = static_cast<int>(std::nearbyint((2.0f * fr - 1.0f) * 8.0f));  // exact before rounding; ties to even
  if (m == 8) { m = 0; ++e; }
  return static_cast<uint8_t>(sign | ((e + 7) << 3) | m);  // a < 448 keeps the code <= 0x7e
}

}  // namespace brigade
