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
//
// q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, mxfp4: ggml's block-quantized weight formats, byte for byte as GGUF
// stores them
// (core/quant.h): a row of k elements is k / block elements blocks of dtype_block_bytes bytes.
// Only matmul weights (and embedding tables) have them, on a backend whose supports_weight_dtype
// says yes; they have no per-element size (dtype_size is 0), so sizes go through dtype_bytes.
enum class DType : uint8_t { f32, f16, bf16, i32, i64, i8, u8, f8e4m3, q8_0, q4_0, q4_k, q6_k, q5_k, q4_1, mxfp4 };

// Bytes of one element; 0 for the block-quantized types.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::i64: return 8;
    case DType::i8: case DType::u8: case DType::f8e4m3: return 1;
    case DType::q8_0: case DType::q4_0: case DType::q4_1: case DType::q4_k: case DType::q5_k: case DType::q6_k:
    case DType::mxfp4: return 0;
  }
  return 0;
}

// Elements per block: 1 for the element types, 32 (q8_0, q4_0, q4_1, mxfp4) or 256 (q4_k, q5_k, q6_k).
constexpr int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::q8_0: case DType::q4_0: case DType::q4_1: case DType::mxfp4: return 32;
    case DType::q4_k: case DType::q5_k: case DType::q6_k: return 256;
    default: return 1;
  }
}
// Bytes per block (dtype_size for the element types).
constexpr size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::q8_0: return 34;
    case DType::q4_0: return 18;
    case DType::q4_1: return 20;
    case DType::mxfp4: return 17;
    case DType::q4_k: return 144;
    case DType::q5_k: return 176;
    case DType::q6_k: return 210;
    default: return dtype_size(t);
  }
}
constexpr bool is_block_quantized(DType t) { return dtype_block_elems(t) > 1; }
// Bytes of n elements of type t; n must be a whole number of blocks (a row of a quantized weight).
constexpr size_t dtype_bytes(DType t, int64_t n) {
  return static_cast<size_t>(n / dtype_block_elems(t)) * dtype_block_bytes(t);
}

const char* dtype_name(DType t);
// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16", "i32", "i64", "i8", "u8",
// "f8e4m3"/"fp8", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k", "mxfp4" (GGUF's upper-case names too).
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
