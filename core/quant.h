// ggml's block-quantized weight formats (DType q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, mxfp4), byte for byte as
// GGUF files store them, so a GGUF tensor is used in place: the CPU backend multiplies them
// directly (cpu/quant_kernels.h) and any other consumer dequantizes rows with dequantize_row.
//
//   q8_0  32 elements in 34 bytes:  f16 d, int8 q[32];                   x = d * q
//   q4_0  32 elements in 18 bytes:  f16 d, u8 qs[16];                    x[j] = d * ((qs[j] & 15) - 8),
//                                                                        x[j + 16] = d * ((qs[j] >> 4) - 8)
//   q4_1  32 elements in 20 bytes:  f16 d, f16 m, u8 qs[16];             x[j] = d * (qs[j] & 15) + m,
//                                                                        x[j + 16] = d * (qs[j] >> 4) + m
//   mxfp4 32 elements in 17 bytes:  u8 e (E8M0), u8 qs[16];              x[j] = kMxfp4Values[qs[j] & 15] * h,
//         (OCP microscaling MXFP4)                                       x[j + 16] = kMxfp4Values[qs[j] >> 4] * h,
//         with h = e8m0_to_f32_half(e) = 2^(e - 128): the E2M1 code's value doubled (so integer) times
//         half the block's power-of-two scale 2^(e - 127).
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

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace brigade::quant {

constexpr int kQ8_0Block = 32;
constexpr int kQ4_0Block = 32;
constexpr int kQ4_1Block = 32;
constexpr int kMxfp4Block = 32;
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
struct BlockMxfp4 {
  uint8_t e;  // E8M0: the block's scale 2^(e - 127)
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockMxfp4) == 17 && alignof(BlockMxfp4) == 1);
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

// The 16 E2M1 (fp4) codes' values doubled: sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6 times two.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) exactly, as ggml's GGML_E8M0_TO_FP32_HALF: half an E8M0 scale, to go with the doubled
// kMxfp4Values. e < 2 gives the f32 subnormals 2^-128 and 2^-127; e = 255 (E8M0's NaN) gives 2^127.
constexpr float e8m0_to_f32_half(uint8_t e) {
  return std::bit_cast<float>(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23);
}

// dst[0, n) = the values of n elements of type t at src (n a multiple of t's block). Float types
// (f32, f16, bf16) convert too, so a caller need not tell them apart.
void dequantize_row(const void* src, DType t, float* dst, int64_t n);

// Round-to-nearest quantization as ggml's reference (quantize_row_*_ref): q8_0 takes d = absmax / 127;
// q4_0 takes d = -max / 8 with max the element of largest magnitude (its sign kept); q4_1 takes
// m = min, d = (max - min) / 15 per block and codes trunc((x - min) / d + 0.5) (at most 15). n a
// multiple of 32. mxfp4 takes e = floor(log2(absmax)) - 2 + 127 (0 for an all-zero block, clamped
// to 0 below absmax 2^-125) and for each element the first of the nearest kMxfp4Values * h
// (ggml's quantize_row_mxfp4_ref, gguf-py's MXFP4.quantize_blocks).
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_1(const float* src, void* dst, int64_t n);
void quantize_row_mxfp4(const float* src, void* dst, int64_t n);

// Whether quantize_row exists for t (q8_0, q4_0, q4_1, mxfp4): the types a float weight can be
// quantized to at load (`weights: q8_0`). q4_k, q5_k and q6_k come only from GGUF files.
bool can_quantize_to(DType t);
void quantize_row(const float* src, DType t, void* dst, int64_t n);

// Repacks an MXFP4 weight W [rows, cols] from the Hugging Face layout (transformers' gpt-oss
// checkpoints: `<name>_blocks` u8 [rows, cols / 32, 16] and `<name>_scales` u8 [rows, cols / 32],
// any leading expert dims folded into rows) into rows * cols / 32 BlockMxfp4 at dst, exactly:
// dequantize_row of the result equals transformers' convert_moe_packed_tensors (before its
// transpose) element for element. HF's byte k of a block holds elements 2k (low nibble) and 2k + 1
// (high); ggml's byte j holds j (low) and j + 16 (high), so the nibbles are reordered. The scale
// byte is the same E8M0 (HF: fp4 * 2^(s - 127) = kMxfp4Values * 2^(s - 128)) and is copied, but
// for s = 255, E8M0's NaN, which transformers turns into inf and ggml into 2^127. cols a multiple
// of 32; dst holds rows * cols / 32 * 17 bytes and does not overlap the inputs.
void repack_hf_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t cols, void* dst);

}  // namespace brigade::quant
