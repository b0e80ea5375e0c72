// AVX2 quantized matmul (cpu/quant_kernels.h): maddubs (u8 x s8 -> pairs of i16) then madd (-> i32).
// The bodies are in quant_kernels_simd.inc.
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

namespace brigade::cpu::avx2_q {

#define BRIGADE_TARGET __attribute__((target("avx2,fma,f16c")))
// The inner loops' helpers are always inlined: GCC leaves some block steps out of line, and an
// out-of-line step keeps its accumulators in memory, a store and reload on every block.
#define BRIGADE_INLINE inline __attribute__((always_inline))

namespace {
BRIGADE_TARGET BRIGADE_INLINE __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
BRIGADE_TARGET BRIGADE_INLINE __m256i dot_acc(__m256i acc, __m256i u, __m256i s) { return _mm256_add_epi32(acc, dot_u8s8(u, s)); }
}  // namespace

#define BRIGADE_VNNI 0
#include "cpu/quant_kernels_simd.inc"
#include "cpu/quant_kdecode_simd.inc"
#include "cpu/quant_gemm_simd.inc"
#undef BRIGADE_VNNI

#undef BRIGADE_INLINE
#undef BRIGADE_TARGET

}  // namespace brigade::cpu::avx2_q
