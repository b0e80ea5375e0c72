// ggml's block-quantized weight formats (DType q8_0, q4_0, q4_1, q4_k, q5_k, q6_k), byte for byte as
// GGUF files store them, so a GGUF tensor is used in place: the CPU backend multiplies them
// directly (cpu/quant_kernels.h) and any other consumer dequantizes rows with dequantize_row.
//
//   q8_0  32 elements in 34 bytes:  f16 d, int8 q[32];                   x = d * q
//   q4_0  32 elements in 18 bytes:  f16 d, u8 qs[16];                    x[j] = d * ((qs[j] & 15) - 8),
//                                                                        x[j + 16] = d * ((qs[j] >> 4) - 8)
//   q4_1  32 elements in 20 bytes:  f16 d, f16 m, u8 qs[16];             x[j] = d * (qs[j] & 15) + m,
//                                                                        x[j + 16] = d * (qs[j] >> 4) + m
//   q4_k  256 elements in 144 bytes: f16 d, f16 dmin, u8 scales[12], u8 qs[128]: eight sub-blocks
//         of 32 with 6-bit scale sc and min m each (packed in scales[12], see q4k_scale_min);
//         x = d * sc * q - dmin * m with q the 4-bit code. Sub-blocks 2i and 2i+1 share qs[32i,
//         32i + 32): the low nibbles are sub-block 2i, the high ones 2i + 1.
//   q5_k  256 elements in 176 bytes: f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]: as q4_k
//         with a 5-bit code q, whose bit 4 for element l of sub-block s is bit s of qh[l].
//   q6_k  256 elements in 210 bytes: u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits), int8
//         scales[16] (one per 16 elements), f16 d;  x = d * scale * (q - 32) with q 6-bit.
//         Elements are in two halves of 128; in each, for l < 32, the four elements l, l + 32,
//         l + 64, l + 96 take ql[l] low, ql[l + 32] low, ql[l] high, ql[l + 32] high nibbles and
//         bits 0-1, 2-3, 4-5, 6-7 of qh[l]; element e's scale is scales[e / 16] (within the half).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace brigade::quant {

constexpr int kQ8_0Block = 32;
constexpr int kQ4_0Block = 32;
constexpr int kQ4_1Block = 32;
constexpr int kSuperBlock = 256;  // q4_k, q5_k, q6_k

struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;  // f16
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16: the value of code 0
  uint8_t qs[16];
};
struct BlockQ4K {
  uint16_t d;     // f16, multiplies the 6-bit scales
  uint16_t dmin;  // f16, multiplies the 6-bit mins
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5K {
  uint16_t d;     // f16, multiplies the 6-bit scales
  uint16_t dmin;  // f16, multiplies the 6-bit mins
  uint8_t scales[12];
  uint8_t qh[32];  // bit s of qh[l]: bit 4 of element l of sub-block s
  uint8_t qs[128];
};
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // f16
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ4K) == 144 && sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210);
static_assert(alignof(BlockQ8_0) == 2 && alignof(BlockQ6K) == 2);

// Sub-block j's (0..7) 6-bit scale and min of a q4_k block's packed scales[12]: sub-blocks 0-3
// keep theirs in the low 6 bits of bytes j and j + 4; sub-blocks 4-7 in the nibbles of byte j + 4
// with their top 2 bits in the top bits of bytes j - 4 (scale) and j (min).
inline void q4k_scale_min(int j, const uint8_t* s, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// dst[0, n) = the values of n elements of type t at src (n a multiple of t's block). Float types
// (f32, f16, bf16) convert too, so a caller need not tell them apart.
void dequantize_row(const void* src, DType t, float* dst, int64_t n);

// Round-to-nearest quantization as ggml's reference (quantize_row_*_ref): q8_0 takes d = absmax / 127;
// q4_0 takes d = -max / 8 with max the element of largest magnitude (its sign kept); q4_1 takes
// m = min, d = (max - min) / 15 per block and codes trunc((x - min) / d + 0.5) (at most 15). n a
// multiple of 32.
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_1(const float* src, void* dst, int64_t n);

// Whether quantize_row exists for t (q8_0, q4_0, q4_1): the types a float weight can be quantized to at
// load (`weights: q8_0`). q4_k, q5_k and q6_k come only from GGUF files.
bool can_quantize_to(DType t);
void quantize_row(const float* src, DType t, void* dst, int64_t n);

}  // namespace brigade::quant
