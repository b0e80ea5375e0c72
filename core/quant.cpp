#include "core/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"

namespace brigade::quant {
namespace {

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(b[i].qs[j]);
  }
}

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>((b[i].qs[j] & 0xF) - 8);
      y[j + 16] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(b[i].qs[j] & 0xF) + m;
      y[j + 16] = d * static_cast<float>(b[i].qs[j] >> 4) + m;
    }
  }
}

void dequant_mxfp4(const BlockMxfp4* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float h = e8m0_to_f32_half(b[i].e);
    for (int j = 0; j < 16; ++j) {
      y[j] = h * static_cast<float>(kMxfp4Values[b[i].qs[j] & 0xF]);
      y[j + 16] = h * static_cast<float>(kMxfp4Values[b[i].qs[j] >> 4]);
    }
  }
}

// The first code whose value v * h is nearest x (ggml's best_index_mxfp4).
int nearest_mxfp4(float x, float h) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * h - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * h - x);
    if (err < best_err) best = i, best_err = err;
  }
  return best;
}

void dequant_q4k(const BlockQ4K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int sub = 0; sub < 8; sub += 2, q += 32) {
      uint8_t sc, m;
      q4k_scale_min(sub, b[i].scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      q4k_scale_min(sub + 1, b[i].scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequant_q5k(const BlockQ5K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      q4k_scale_min(s, b[i].scales, sc, m);
      const float dl = d * sc, ml = dmin * m;
      const uint8_t* q = b[i].qs + 32 * (s / 2);
      const int shift = (s & 1) * 4;
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 15) | (((b[i].qh[l] >> s) & 1) << 4);
        *y++ = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

void dequant_q6k(const BlockQ6K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is + 0] * q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2] * q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4] * q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6] * q4);
      }
    }
  }
}

}  // namespace

void dequantize_row(const void* src, DType t, float* dst, int64_t n) {
  const int64_t blk = dtype_block_elems(t);
  BRIGADE_CHECK(n % blk == 0, "a quantized row is whole blocks");
  const int64_t nb = n / blk;
  switch (t) {
    case DType::q8_0: dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case DType::q4_0: dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case DType::q4_1: dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
    case DType::mxfp4: dequant_mxfp4(static_cast<const BlockMxfp4*>(src), dst, nb); return;
    case DType::q4_k: dequant_q4k(static_cast<const BlockQ4K*>(src), dst, nb); return;
    case DType::q5_k: dequant_q5k(static_cast<const BlockQ5K*>(src), dst, nb); return;
    case DType::q6_k: dequant_q6k(static_cast<const BlockQ6K*>(src), dst, nb); return;
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    default: BRIGADE_CHECK(false, "dequantize_row of a quantized or float type");
  }
}

void quantize_row_q8_0(const float* x, void* dst, int64_t n) {
  BRIGADE_CHECK(n % 32 == 0, "q8_0 rows are whole blocks of 32");
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
  }
}

void quantize_row_q4_0(const float* x, void* dst, int64_t n) {
  BRIGADE_CHECK(n % 32 == 0, "q4_0 rows are whole blocks of 32");
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q4_1(const float* x, void* dst, int64_t n) {
  BRIGADE_CHECK(n % 32 == 0, "q4_1 rows are whole blocks of 32");
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; ++j) min = std::min(min, x[j]), max = std::max(max, x[j]);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + 16] - min) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_row_mxfp4(const float* x, void* dst, int64_t n) {
  BRIGADE_CHECK(n % 32 == 0, "mxfp4 rows are whole blocks of 32");
  auto* b = static_cast<BlockMxfp4*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // A finite absmax is below 2^128, so e <= 252; below 2^-125 e would be negative: clamped to 0.
    const float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
    b[i].e = static_cast<uint8_t>(std::max(e, 0.0f));
    const float h = e8m0_to_f32_half(b[i].e);
    for (int j = 0; j < 16; ++j)
      b[i].qs[j] = static_cast<uint8_t>(nearest_mxfp4(x[j], h) | (nearest_mxfp4(x[j + 16], h) << 4));
  }
}

bool can_quantize_to(DType t) {
  return t == DType::q8_0 || t == DType::q4_0 || t == DType::q4_1 || t == DType::mxfp4;
}

void quantize_row(const float* src, DType t, void* dst, int64_t n) {
  if (t == DType::q8_0) return quantize_row_q8_0(src, dst, n);
  if (t == DType::q4_0) return quantize_row_q4_0(src, dst, n);
  if (t == DType::q4_1) return quantize_row_q4_1(src, dst, n);
  if (t == DType::mxfp4) return quantize_row_mxfp4(src, dst, n);
  BRIGADE_CHECK(false, "quantize_row to q8_0, q4_0, q4_1 or mxfp4");
}

void repack_hf_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t cols, void* dst) {
  BRIGADE_CHECK(cols % 32 == 0, "an MXFP4 row is whole blocks of 32");
  auto* b = static_cast<BlockMxfp4*>(dst);
  const int64_t nb = rows * (cols / 32);
  for (int64_t i = 0; i < nb; ++i, blocks += 16) {
    b[i].e = scales[i];
    // ggml's element j (j < 16) is HF's byte j / 2, nibble j % 2; element j + 16 is byte 8 + j / 2.
    for (int j = 0; j < 16; ++j) {
      const int shift = (j & 1) * 4;
      const int lo = (blocks[j / 2] >> shift) & 0xF;
      const int hi = (blocks[8 + j / 2] >> shift) & 0xF;
      b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace brigade::quant
