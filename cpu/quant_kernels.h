// Internal to cpu/: matmul with a block-quantized weight (core/quant.h).
//
// As llama.cpp does, the activations are quantized too, per block of 32 (BlockQ8: one f32 scale,
// 32 int8), so each weight block meets its activation block in integer multiply-adds and one
// float multiply by the two scales. A weight block's offset (q4_0's 8, q4_k's min, q6_k's 32)
// is applied through the activation block's sums. Decode (n < kBlasMinRows) takes qmatmul_rows,
// which shares each unpacked weight block among up to 4 activation rows (quant_kernels_simd.inc);
// prefill takes qgemm_rows, which repacks 8 weight rows at a time so that one vpdpbusd yields 8
// rows' partial block sums (quant_gemm_simd.inc). Like sgemm for float weights, the two sum in
// different orders.
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

// out[i, r] = sum_j x[i, j] * w[r, j] for i in [0, n), r in [m_begin, m_end), with x given as n
// rows of nb BlockQ8 each and w [m, nb * 32] of type w_dtype (row r at w + r * row_bytes).
struct QMatmulArgs {
  const BlockQ8* x = nullptr;
  int64_t n = 0;
  int64_t nb = 0;  // activation blocks per row: k / 32
  const void* w = nullptr;
  DType w_dtype = DType::q8_0;
  size_t row_bytes = 0;
  int64_t m = 0;
  float* out = nullptr;
};

// Per-level implementations, filled into Kernels::quantize_q8 / qmatmul_rows / qgemm_rows.
namespace scalar_q {
// y[b] for the k / 32 blocks of x: d = absmax / 127, qs = round-to-nearest-even(x / d).
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
}  // namespace scalar_q
namespace avx2_q {
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
void qgemm_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
int64_t int8_dot_loop(int64_t iters);
}  // namespace avx2_q
// AVX-512 VNNI on 256-bit vectors; only valid where vnni_q::available().
namespace vnni_q {
bool available();
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
void qgemm_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
int64_t int8_dot_loop(int64_t iters);
}  // namespace vnni_q

}  // namespace brigade::cpu
