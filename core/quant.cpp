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

bool can_quantize_to(DType t) { return t == DType::q8_0 || t == DType::q4_0 || t == DType::q4_1; }

void quantize_row(const float* src, DType t, void* dst, int64_t n) {
  if (t == DType::q8_0) return quantize_row_q8_0(src, dst, n);
  if (t == DType::q4_0) return quantize_row_q4_0(src, dst, n);
  if (t == DType::q4_1) return quantize_row_q4_1(src, dst, n);
  BRIGADE_CHECK(false, "quantize_row to q8_0, q4_0 or q4_1");
}

}  // namespace brigade::quant
