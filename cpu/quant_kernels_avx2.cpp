// AVX2 quantized matmul (cpu/quant_kernels.h). Each weight block is unpacked once into unsigned
// bytes (4- or 6-bit codes; q8_0 keeps its sign through the sign trick) and meets up to four
// activation rows' blocks: maddubs (u8 x s8 -> pairs of i16) then madd (-> i32), converted to f32
// and accumulated with the product of the two block scales. Every intermediate fits its lanes:
// |q8_0| <= 127 so a pair is <= 2 * 127 * 127; 4-bit codes <= 15; 6-bit codes <= 63, and q6_k's
// offset is subtracted in i16 before the scales are applied in madd.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/quant.h"
#include "core/status.h"
#include "cpu/quant_kernels.h"

namespace brigade::cpu::avx2_q {
namespace {

#define BRIGADE_TARGET __attribute__((target("avx2,fma,f16c")))

using quant::BlockQ4_0;
using quant::BlockQ4K;
using quant::BlockQ6K;
using quant::BlockQ8_0;

BRIGADE_TARGET inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
BRIGADE_TARGET inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
BRIGADE_TARGET inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}
BRIGADE_TARGET inline float f16(uint16_t h) { return _cvtsh_ss(h); }
BRIGADE_TARGET inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
// Sums of 4 adjacent u8 x s8 products, as 8 i32 lanes.
BRIGADE_TARGET inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The activation blocks of NT consecutive rows starting at row i0, for weight block b.
template <int NT>
struct XRows {
  const BlockQ8* row[NT];
  XRows(const QMatmulArgs& a, int64_t i0) {
    for (int t = 0; t < NT; ++t) row[t] = a.x + (i0 + t) * a.nb;
  }
};

template <int NT>
BRIGADE_TARGET void row_q8_0(const QMatmulArgs& a, const void* wrow, const XRows<NT>& x, float* res) {
  const auto* w = static_cast<const BlockQ8_0*>(wrow);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < a.nb; ++b) {
    const __m256i qw = load(w[b].qs);
    const __m256i aw = _mm256_sign_epi8(qw, qw);
    const float dw = f16(w[b].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8& xb = x.row[t][b];
      const __m256i p = dot_u8s8(aw, _mm256_sign_epi8(load(xb.qs), qw));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d), _mm256_cvtepi32_ps(p), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) res[t] = hsum(acc[t]);
}

template <int NT>
BRIGADE_TARGET void row_q4_0(const QMatmulArgs& a, const void* wrow, const XRows<NT>& x, float* res) {
  const auto* w = static_cast<const BlockQ4_0*>(wrow);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  float corr[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps(), corr[t] = 0.0f;
  for (int64_t b = 0; b < a.nb; ++b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs));
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), m4);
    const float dw = f16(w[b].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8& xb = x.row[t][b];
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d), _mm256_cvtepi32_ps(dot_u8s8(q, load(xb.qs))), acc[t]);
      corr[t] += dw * xb.s;
    }
  }
  for (int t = 0; t < NT; ++t) res[t] = hsum(acc[t]) - 8.0f * corr[t];
}

template <int NT>
BRIGADE_TARGET void row_q4k(const QMatmulArgs& a, const void* wrow, const XRows<NT>& x, float* res) {
  const auto* w = static_cast<const BlockQ4K*>(wrow);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  float corr[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps(), corr[t] = 0.0f;
  for (int64_t sb = 0; sb < a.nb / 8; ++sb) {
    const BlockQ4K& wb = w[sb];
    const float d = f16(wb.d), dmin = f16(wb.dmin);
    float dsc[8], mmin[8];
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      quant::q4k_scale_min(j, wb.scales, sc, mn);
      dsc[j] = d * sc;
      mmin[j] = dmin * mn;
    }
    for (int p = 0; p < 4; ++p) {
      const __m256i q = load(wb.qs + 32 * p);
      const __m256i lo = _mm256_and_si256(q, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      for (int t = 0; t < NT; ++t) {
        const BlockQ8& x0 = x.row[t][8 * sb + 2 * p];
        const BlockQ8& x1 = x.row[t][8 * sb + 2 * p + 1];
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dsc[2 * p] * x0.d), _mm256_cvtepi32_ps(dot_u8s8(lo, load(x0.qs))), acc[t]);
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dsc[2 * p + 1] * x1.d), _mm256_cvtepi32_ps(dot_u8s8(hi, load(x1.qs))), acc[t]);
        corr[t] += mmin[2 * p] * x0.s + mmin[2 * p + 1] * x1.s;
      }
    }
  }
  for (int t = 0; t < NT; ++t) res[t] = hsum(acc[t]) - corr[t];
}

template <int NT>
BRIGADE_TARGET void row_q6k(const QMatmulArgs& a, const void* wrow, const XRows<NT>& x, float* res) {
  const auto* w = static_cast<const BlockQ6K*>(wrow);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), m32 = _mm256_set1_epi8(32);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < a.nb / 8; ++sb) {
    const BlockQ6K& wb = w[sb];
    const float d = f16(wb.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = wb.ql + 64 * h;
      const __m256i qla = load(ql), qlb = load(ql + 32), qh = load(wb.qh + 32 * h);
      // The 6-bit codes of the half's four blocks of 32 (elements l, l + 32, l + 64, l + 96).
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(qla, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(qlb, m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qla, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qlb, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
      const int8_t* sc = wb.scales + 8 * h;
      for (int c = 0; c < 4; ++c) {
        // i16 lanes 0-7 hold the first 16 elements' pair sums, lanes 8-15 the last 16's.
        const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(sc[2 * c + 1]), _mm_set1_epi16(sc[2 * c]));
        for (int t = 0; t < NT; ++t) {
          const BlockQ8& xb = x.row[t][8 * sb + 4 * h + c];
          const __m256i qx = load(xb.qs);
          const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q[c], qx), _mm256_maddubs_epi16(m32, qx));
          const __m256i p32 = _mm256_madd_epi16(p16, scales);
          acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb.d), _mm256_cvtepi32_ps(p32), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) res[t] = hsum(acc[t]);
}

template <int NT>
BRIGADE_TARGET void rows(const QMatmulArgs& a, int64_t i0, int64_t r0, int64_t r1) {
  const XRows<NT> x(a, i0);
  float res[NT];
  for (int64_t r = r0; r < r1; ++r) {
    const void* wrow = static_cast<const char*>(a.w) + static_cast<size_t>(r) * a.row_bytes;
    switch (a.w_dtype) {
      case DType::q8_0: row_q8_0<NT>(a, wrow, x, res); break;
      case DType::q4_0: row_q4_0<NT>(a, wrow, x, res); break;
      case DType::q4_k: row_q4k<NT>(a, wrow, x, res); break;
      case DType::q6_k: row_q6k<NT>(a, wrow, x, res); break;
      default: BRIGADE_CHECK(false, "quantized matmul weights are q8_0, q4_0, q4_k or q6_k");
    }
    for (int t = 0; t < NT; ++t) a.out[(i0 + t) * a.m + r] = res[t];
  }
}

}  // namespace

BRIGADE_TARGET void quantize_q8(const float* x, BlockQ8* y, int64_t k) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                                   _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    const float amax = hmax(m);
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 127.0f / amax : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));  // nearest even
    const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    // packs interleave the 128-bit lanes; the permutation puts the 32 bytes back in order.
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), _mm256_permutevar8x32_epi32(packed, perm));
    y[b].d = d;
    y[b].s = d * static_cast<float>(sum);
  }
}

BRIGADE_TARGET void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end) {
  // Weight rows per pass: about 32 KiB, so they stay in L1/L2 while each group of up to four
  // activation rows passes over them.
  const int64_t block = std::max<int64_t>(4, static_cast<int64_t>(32768 / std::max<size_t>(1, a.row_bytes)));
  for (int64_t rb = m_begin; rb < m_end; rb += block) {
    const int64_t re = std::min(m_end, rb + block);
    for (int64_t i = 0; i < a.n;) {
      const int64_t left = a.n - i;
      if (left >= 4) { rows<4>(a, i, rb, re); i += 4; }
      else if (left >= 2) { rows<2>(a, i, rb, re); i += 2; }
      else { rows<1>(a, i, rb, re); i += 1; }
    }
  }
}

#undef BRIGADE_TARGET

}  // namespace brigade::cpu::avx2_q
