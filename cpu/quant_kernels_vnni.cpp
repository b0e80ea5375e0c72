// AVX-512 VNNI quantized matmul, mostly on 256-bit vectors (cpu/quant_kernels.h; q4_0/q4_1/mxfp4
// decode and the prefill kernel's 16-row panels on 512): vpdpbusd multiplies u8 x s8
// and sums four products into i32 in one instruction, without maddubs' i16 saturation.
// The bodies are in quant_kernels_simd.inc.
// GCC 12's 512-bit intrinsics start from _mm512_undefined_*, which -Wuninitialized reports as an
// uninitialised use; the warning is a known false positive (GCC PR105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/quant.h"
#include "core/status.h"
#include "cpu/quant_kernels.h"

namespace brigade::cpu::vnni_q {

#define BRIGADE_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
// The inner loops' helpers are always inlined: GCC leaves some block steps out of line, and an
// out-of-line step keeps its accumulators in memory, a store and reload on every block.
#define BRIGADE_INLINE inline __attribute__((always_inline))

namespace {
BRIGADE_TARGET BRIGADE_INLINE __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}
BRIGADE_TARGET BRIGADE_INLINE __m256i dot_acc(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
}  // namespace

#define BRIGADE_VNNI 1
#include "cpu/quant_kernels_simd.inc"
#include "cpu/quant_kdecode_simd.inc"
#include "cpu/quant_gemm_simd.inc"
#undef BRIGADE_VNNI

bool available() {
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

#undef BRIGADE_INLINE
#undef BRIGADE_TARGET

}  // namespace brigade::cpu::vnni_q
