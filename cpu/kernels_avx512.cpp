// AVX-512 kernels (16 f32 lanes; F + BW + VL); the bodies are in kernels_simd.inc. The
// avx512bf16 level uses the same table: for bf16 weights the shift-widening load already keeps
// GEMV at memory speed, and x stays f32 (no rounding of activations to bf16).
// GCC 12 reports its own AVX-512 intrinsics (_mm512_undefined_ps inside the reductions) as
// uninitialised use; the warning is a known false positive (GCC PR105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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
namespace avx512 {

#define BRIGADE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

using vf = __m512;
constexpr int64_t kLanes = 16;

BRIGADE_TARGET inline vf vzero() { return _mm512_setzero_ps(); }
BRIGADE_TARGET inline vf vload(const float* p) { return _mm512_loadu_ps(p); }
BRIGADE_TARGET inline void vstore(float* p, vf v) { _mm512_storeu_ps(p, v); }
BRIGADE_TARGET inline vf vset1(float a) { return _mm512_set1_ps(a); }
BRIGADE_TARGET inline vf vfmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
BRIGADE_TARGET inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
BRIGADE_TARGET inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
BRIGADE_TARGET inline float vhsum(vf v) { return _mm512_reduce_add_ps(v); }
BRIGADE_TARGET inline float vhmax(vf v) { return _mm512_reduce_max_ps(v); }
// r[0..16) as a 16 x 16 matrix, transposed in place: unpack pairs, then quads, then 128-bit
// blocks twice.
BRIGADE_TARGET inline void vtranspose(vf* r) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
}
BRIGADE_TARGET inline vf vload_bf16(const uint16_t* p) {
  const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
BRIGADE_TARGET inline vf vload_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// int8 -> f32, kLanes values (16 bytes).
BRIGADE_TARGET inline vf vload_i8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

BRIGADE_TARGET inline vf vmin(vf a, vf b) { return _mm512_min_ps(a, b); }
BRIGADE_TARGET inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
BRIGADE_TARGET inline vf vdiv(vf a, vf b) { return _mm512_div_ps(a, b); }
BRIGADE_TARGET inline vf vround(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// 2^n for integral n in [-126, 127], built in the exponent field.
BRIGADE_TARGET inline vf vpow2(vf n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}

#include "cpu/kernels_simd.inc"

#undef BRIGADE_TARGET

}  // namespace avx512

const Kernels& avx512_kernels() {
  static const Kernels table = [] {
    Kernels t;
    t.level = SimdLevel::avx512;
    t.matmul_rows = avx512::matmul_rows;
    t.to_f32 = avx512::to_f32;
    t.from_f32 = scalar_kernels().from_f32;
    t.silu_mul = avx512::silu_mul;
    t.gelu_erf = avx512::gelu_erf;
    t.gelu_tanh = avx512::gelu_tanh;
    t.gelu_tanh_mul = avx512::gelu_tanh_mul;
    t.ssm_diag_rows = avx512::ssm_diag_rows;
    t.dot = avx512::dot;
    t.scale_axpy = avx512::scale_axpy;
    t.attend_scores = avx512::attend_scores;
    t.attend_values = avx512::attend_values;
    t.transpose_keys = avx512::transpose_keys;
    // Integer kernels: with VNNI's vpdpbusd where the CPU has it (prefill panels on 512 bits), else AVX2's.
    t.quantize_q8 = vnni_q::available() ? vnni_q::quantize_q8 : avx2_q::quantize_q8;
    t.qmatmul_rows = vnni_q::available() ? vnni_q::qmatmul_rows : avx2_q::qmatmul_rows;
    t.qgemm_rows = vnni_q::available() ? vnni_q::qgemm_rows : avx2_q::qgemm_rows;
    t.quantize_q8k = vnni_q::available() ? vnni_q::quantize_q8k : avx2_q::quantize_q8k;
    t.qkmatmul_rows = vnni_q::available() ? vnni_q::qkmatmul_rows : avx2_q::qkmatmul_rows;
    t.int8_dot_loop = vnni_q::available() ? vnni_q::int8_dot_loop : avx2_q::int8_dot_loop;
    return t;
  }();
  return table;
}

const Kernels& avx512bf16_kernels() {
  static const Kernels table = [] {
    Kernels t = avx512_kernels();
    t.level = SimdLevel::avx512bf16;
    return t;
  }();
  return table;
}

}  // namespace brigade::cpu
