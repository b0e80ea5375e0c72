// Internal to cpu/: matmul with a block-quantized weight (core/quant.h) while decoding.
//
// As llama.cpp does, the activations are quantized too, per block of 32 (BlockQ8: one f32 scale,
// 32 int8), so each weight block meets its activation block in integer multiply-adds and one
// float multiply by the two scales. A weight block's offset (q4_0's 8, q4_k's min, q6_k's 32)
// is applied through the activation block's sum `s`. Prefill takes the other path: weight panels
// dequantized to f32 and sgemm (cpu/quant_matmul.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace brigade::cpu {

struct BlockQ8 {
  float d;  // scale: x ~ d * qs
  float s;  // d * sum(qs)
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8) == 40);

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

// Per-level implementations, filled into Kernels::quantize_q8 / qmatmul_rows.
namespace scalar_q {
// y[b] for the k / 32 blocks of x: d = absmax / 127, qs = round-to-nearest-even(x / d).
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
}  // namespace scalar_q
namespace avx2_q {
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
}  // namespace avx2_q
// AVX-512 VNNI on 256-bit vectors; only valid where vnni_q::available().
namespace vnni_q {
bool available();
void quantize_q8(const float* x, BlockQ8* y, int64_t k);
void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end);
}  // namespace vnni_q

}  // namespace brigade::cpu
