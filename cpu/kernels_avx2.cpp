// AVX2 + FMA + F16C kernels (8 f32 lanes); the bodies are in kernels_simd.inc.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/status.h"
#include "cpu/kernels.h"

namespace brigade::cpu {
namespace avx2 {

#define BRIGADE_TARGET __attribute__((target("avx2,fma,f16c")))

using vf = __m256;
constexpr int64_t kLanes = 8;

BRIGADE_TARGET inline vf vzero() { return _mm256_setzero_ps(); }
BRIGADE_TARGET inline vf vload(const float* p) { return _mm256_loadu_ps(p); }
BRIGADE_TARGET inline void vstore(float* p, vf v) { _mm256_storeu_ps(p, v); }
BRIGADE_TARGET inline vf vset1(float a) { return _mm256_set1_ps(a); }
BRIGADE_TARGET inline vf vfmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
BRIGADE_TARGET inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
BRIGADE_TARGET inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
BRIGADE_TARGET inline float vhsum(vf v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
BRIGADE_TARGET inline float vhmax(vf v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// r[0..8) as an 8 x 8 matrix, transposed in place.
BRIGADE_TARGET inline void vtranspose(vf* r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
// bf16 is the top half of an f32: widen to 32 bits and shift into place.
BRIGADE_TARGET inline vf vload_bf16(const uint16_t* p) {
  const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
BRIGADE_TARGET inline vf vload_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// int8 -> f32, kLanes values (8 bytes).
BRIGADE_TARGET inline vf vload_i8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

BRIGADE_TARGET inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }
BRIGADE_TARGET inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
BRIGADE_TARGET inline vf vdiv(vf a, vf b) { return _mm256_div_ps(a, b); }
BRIGADE_TARGET inline vf vround(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// 2^n for integral n in [-126, 127], built in the exponent field.
BRIGADE_TARGET inline vf vpow2(vf n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}

#include "cpu/kernels_simd.inc"

#undef BRIGADE_TARGET

}  // namespace avx2

const Kernels& avx2_kernels() {
  static const Kernels table = [] {
    Kernels t;
    t.level = SimdLevel::avx2;
    t.matmul_rows = avx2::matmul_rows;
    t.to_f32 = avx2::to_f32;
    t.from_f32 = scalar_kernels().from_f32;
    t.silu_mul = avx2::silu_mul;
    t.gelu_erf = avx2::gelu_erf;
    t.gelu_tanh = avx2::gelu_tanh;
    t.gelu_tanh_mul = avx2::gelu_tanh_mul;
    t.ssm_diag_rows = avx2::ssm_diag_rows;
    t.dot = avx2::dot;
    t.scale_axpy = avx2::scale_axpy;
    t.attend_scores = avx2::attend_scores;
    t.attend_values = avx2::attend_values;
    t.transpose_keys = avx2::transpose_keys;
    t.quantize_q8 = avx2_q::quantize_q8;
    t.qmatmul_rows = avx2_q::qmatmul_rows;
    t.qgemm_rows = avx2_q::qgemm_rows;
    t.quantize_q8k = avx2_q::quantize_q8k;
    t.qkmatmul_rows = avx2_q::qkmatmul_rows;
    t.int8_dot_loop = avx2_q::int8_dot_loop;
    return t;
  }();
  return table;
}

}  // namespace brigade::cpu
