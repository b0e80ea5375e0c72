// Internal to cpu/: matmul with a block-quantized weight (core/quant.h).
//
// As llama.cpp does, the activations are quantized too, per block of 32 (BlockQ8: one f32 scale,
// 32 int8), so each weight block meets its activation block in integer multiply-adds and one
// float multiply by the two scales. A weight block's offset (q4_0's 8, q4_k's min, q6_k's 32)
// is applied through the activation block's sums. K-quant decodes take qkmatmul_rows over
// BlockQ8K (one scale per 256; below). Other decodes (n < kQuantGemmMinRows) take qmatmul_rows,
// which shares each unpacked weight block among up to 4 activation rows (quant_kernels_simd.inc);
// prefill takes qgemm_rows, which repacks 8 weight rows at a time (16 on AVX-512 VNNI) so that
// one vpdpbusd yields 8 (16) rows' partial block sums (quant_gemm_simd.inc). Like sgemm for float
// weights, the two sum in different orders.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace brigade::cpu {

struct BlockQ8 {
  float d;         // scale: x ~ d * qs
  float s;         // d * sum(qs): the decode kernel's offset term, one load
  int16_t sum[2];  // sum(qs[0..15]), sum(qs[16..31]): the prefill kernel's integer offsets
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8) == 44);

// Activations for the K-quant decode kernels (q4_k, q5_k, q6_k weights, n < kQuantGemmMinRows), as
// llama.cpp's q8_K: one scale per superblock of 256, so a weight superblock meets its activations
// in integer arithmetic (the sub-block scales applied as i16 multiplies) and one float FMA, and
// the mins / q6_k's offset through the sums of 16.
struct BlockQ8K {
  float d;            // scale: x ~ d * qs
  int16_t bsums[16];  // sum(qs[16g .. 16g + 15])
  int8_t qs[256];
};
static_assert(sizeof(BlockQ8K) == 292);

// out[i, r] = sum_j x[i, j] * w[r, j] for i in [0, n), r in [m_begin, m_end), with x given as n
// rows of nb BlockQ8 each and w [m, nb * 32] of type w_dtype (row r at w + r * row_bytes).
struct QMatmulArgs {
  const BlockQ8* x = nullptr;
  int64_t n = 0;
  int64_t nb = 0;  // activation blocks of 32 per row: k / 32
  const void* w = nullptr;
  DType w_dtype = DType::q8_0;
  size_t row_bytes = 0;
  int64_t m = 0;
  float* out = nullptr;
  const BlockQ8K* xk = nullptr;  // qkmatmul_rows: x as n rows of nb / 8 BlockQ8K (x is unused)
};

// Whether the decode matmul of w_dtype reads BlockQ8K activations (qkmatmul_rows).
inline bool decodes_with_q8k(DType w_dtype) {
  return w_dtype == DType::q4_k || w_dtype == DType::q5_k || w_dtype == DType::q6_k;
}

// Per-level implementations, filled into Kernels::quantize_q8 / qmatmul_rows / qgemm_rows.
namespace scalar_q {
// y[b] for the k / 32 blocks of x: d = absmax / 127, qs = round-to-nearest-even(x / d).
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
// y[b] for the k / 256 superblocks of x: d = absmax / 127, qs = round-to-nearest-even(x / d).
void quantize_q8k(const float* x, BlockQ8K* y, int64_t k);
void qkmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
}  // namespace scalar_q
namespace avx2_q {
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
void qgemm_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
int64_t int8_dot_loop(int64_t iters);
void quantize_q8k(const float* x, BlockQ8K* y, int64_t k);
void qkmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
}  // namespace avx2_q
// AVX-512 VNNI (256-bit vectors, and 512 for the q4_0 / q4_1 / mxfp4 decode); only valid where
// vnni_q::available().
namespace vnni_q {
bool available();
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
void qgemm_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
int64_t int8_dot_loop(int64_t iters);
void quantize_q8k(const float* x, BlockQ8K* y, int64_t k);
void qkmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
}  // namespace vnni_q

}  // namespace brigade::cpu
