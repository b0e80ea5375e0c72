// Internal to cpu/: the SIMD kernel table and the level it was chosen for.
//
// Every level (scalar, AVX2, AVX-512, AVX-512 BF16) fills one Kernels table; the backend picks a
// table once at construction (simd_level_from_env) and calls through it, so no kernel checks the
// CPU itself. Kernels are single-threaded: the backend splits the work across its ThreadPool.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "cpu/quant_kernels.h"

namespace brigade::cpu {

enum class SimdLevel : int { scalar = 0, avx2 = 1, avx512 = 2, avx512bf16 = 3 };

const char* simd_level_name(SimdLevel level);
// The best level this CPU supports.
SimdLevel detect_simd_level();
// detect_simd_level(), lowered to BRIGADE_SIMD (scalar|avx2|avx512|avx512bf16) when that is set.
// A request above what the CPU supports is clamped (with a warning): it can only lower the level.
SimdLevel simd_level_from_env();

// out[i, r] = sum_j x[i, j] * w[r, j] for i in [0, n), r in [m_begin, m_end); no bias.
// x [n, k] f32 row-major, w [m, k] of w_dtype (f32, bf16 or f16), out [n, m] f32 (row stride m).
struct MatmulArgs {
  const float* x = nullptr;
  int64_t n = 0;
  int64_t k = 0;
  const void* w = nullptr;
  DType w_dtype = DType::f32;
  int64_t m = 0;
  float* out = nullptr;
};

// Rows of one kv head of a KV cache as attention reads them, in runs (one per page): run r holds
// runs[r].n rows, row t at runs[r].base + t * stride elements of dtype (f32, bf16, f16 or i8);
// i8 rows are scaled by runs[r].scales[t * scale_stride] (cpu/kv_int8.h).
struct KvRun {
  const void* base = nullptr;
  const float* scales = nullptr;
  int64_t n = 0;
};
struct KvRows {
  DType dtype = DType::f32;
  int64_t stride = 0;
  int64_t scale_stride = 0;
  const KvRun* runs = nullptr;
  int64_t n_runs = 0;
  int64_t stride_bytes() const { return stride * static_cast<int64_t>(dtype_size(dtype)); }  // row to row
};

// ALiBi's additive scores for the queries of one Kernels::attend_scores call: query i's score for
// the tile's key t gains slope[i] * (t + offset[i]) (offset: the tile's first key position minus
// the query's position; int32, so that the distance converts to float in vectors).
struct ScoreBias {
  const float* slope = nullptr;
  const int32_t* offset = nullptr;
};

struct Kernels {
  SimdLevel level = SimdLevel::scalar;
  void (*matmul_rows)(const MatmulArgs& a, int64_t m_begin, int64_t m_end) = nullptr;
  // dst[i] = float(src[i]) for src of type t (f32, bf16, f16); n elements.
  void (*to_f32)(const void* src, DType t, float* dst, int64_t n) = nullptr;
  // dst[i] = t(src[i]), rounding to nearest even; n elements.
  void (*from_f32)(const float* src, DType t, void* dst, int64_t n) = nullptr;
  // out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i]; n elements.
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
  float (*dot)(const float* a, const float* b, int64_t n) = nullptr;
  // y[i] = y[i] * scale + a * x[i].
  void (*scale_axpy)(float* y, float scale, float a, const float* x, int64_t n) = nullptr;
  // Block-quantized weights (cpu/quant_kernels.h): activations to BlockQ8 (k a multiple of 32),
  // the decode matmul over them (n < kQuantGemmMinRows), and the prefill one (weights repacked per 8 rows).
  void (*quantize_q8)(const float* x, BlockQ8* y, int64_t k) = nullptr;
  void (*qmatmul_rows)(const QMatmulArgs& a, int64_t m_begin, int64_t m_end) = nullptr;
  void (*qgemm_rows)(const QMatmulArgs& a, int64_t m_begin, int64_t m_end) = nullptr;
  // The int8 multiply-add ceiling, for roofline reports: `iters` rounds of 8 x 32 products in
  // independent dot_acc chains (the quantized kernels' inner instruction; on 512 bits with VNNI,
  // as the prefill kernel runs it); returns a value to keep.
  // nullptr at the scalar level.
  int64_t (*int8_dot_loop)(int64_t iters) = nullptr;
  // The K-quant decode matmul (decodes_with_q8k weights, n < kQuantGemmMinRows) over BlockQ8K
  // activations (k a multiple of 256).
  void (*quantize_q8k)(const float* x, BlockQ8K* y, int64_t k) = nullptr;
  void (*qkmatmul_rows)(const QMatmulArgs& a, int64_t m_begin, int64_t m_end) = nullptr;
  // kt[j * ldk + t] = element j of k's row t (counted across the runs) for t < n_t (the rows of
  // all runs), j < d: a tile's keys for attend_scores, read from the cache in its own dtype. Runs
  // are transposed in groups of kLanes keys, so up to 15 columns past a run's last key are written
  // with zeros (the next run's keys then go there): ldk >= n_t + 15.
  void (*transpose_keys)(const KvRows& k, int64_t d, float* kt, int64_t ldk) = nullptr;
  // The scores half of one online-softmax step of attention, for nq <= kAttendMaxQueries queries
  // over a tile of n_pos keys they all see: query i at q + i * d (already scaled), with its
  // running max m[i] and sum l[i]; keys transposed (transpose_keys: element j of key t at
  // kt[j * ldk + t], and the kLanes-wide loads may read up to 15 finite floats past t = n_pos - 1,
  // whose scores are dropped). Writes p_it = exp(s_it - new m_i) to scores[i * ldk + t] (ldk >=
  // n_pos rounded up to a multiple of 16) and the rescale factor exp(m_i - new m_i) to alpha[i],
  // and updates m and l. softcap > 0: each score s becomes tanh(s / softcap) * softcap first
  // (AttentionMeta::softcap). bias (ALiBi, AttentionMeta::alibi_slopes), when not null: then each
  // score s_it gains bias->slope[i] * (t + bias->offset[i]) (the key's position minus the query's).
  // With the keys vectorised across the tile, QK^T needs no horizontal sums and each loaded key
  // vector serves several queries.
  void (*attend_scores)(const float* q, int64_t nq, const float* kt, int64_t ldk, int64_t n_pos, int64_t d, float* m,
                        float* l, float* alpha, float* scores, float softcap, const ScoreBias* bias) = nullptr;
  // The values half: acc_i[0, d) = alpha_i * acc_i + sum_t p_it v_t for nq queries (acc_i at
  // acc + i * d, p_it at scores[i * ld_scores + t], v_t row t of v counted across its runs, read
  // in its own dtype; the accumulators stay in registers across runs). alpha null: the factor is
  // 1 and acc is not multiplied.
  void (*attend_values)(const float* scores, int64_t ld_scores, int64_t nq, const KvRows& v, int64_t d,
                        const float* alpha, float* acc) = nullptr;
  // x[i] = gelu(x[i]) = x / 2 (1 + erf(x / sqrt 2)) in place (torch's exact GELU); n elements.
  // The scalar level calls std::erf; the SIMD levels evaluate erfc by Abramowitz & Stegun 7.1.26
  // (|error| <= 1.5e-7) with the vectorised exp.
  void (*gelu_erf)(float* x, int64_t n) = nullptr;
  // Mamba1's scan step for nd consecutive channels of one token (cpu/ssm_ops.cpp): for d < nd,
  // state row s[d * n ..] = exp(dt[d] * a[d * n + j]) * s + dt[d] * x[d] * b[j] over j < n, then
  // y[d] = that row . c. One call per block of channels keeps the call cost off a row of 16; the
  // SIMD levels use the vectorised exp (within 2 ulp of expf).
  void (*ssm_diag_rows)(float* s, const float* a, const float* dt, const float* x, const float* b, const float* c,
                        int64_t nd, int64_t n, float* y) = nullptr;
  // torch's gelu(approximate='tanh'): x[i] = x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) in
  // place (gelu_tanh), or out[i] = that of gate[i] times up[i] (gelu_tanh_mul); n elements. The
  // scalar level calls std::tanh; the SIMD levels use 1 + tanh(u) = 2 / (1 + exp(-2u)), so
  // x / (1 + exp(-2u)) with the vectorised exp (a few ulp, no cancellation where x < 0).
  void (*gelu_tanh)(float* x, int64_t n) = nullptr;
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
};

// The most queries one Kernels::attend_scores call takes (its per-query scratch is on the stack).
inline constexpr int64_t kAttendMaxQueries = 64;

// The table for `level`; levels this build or CPU cannot run fall back to the next lower one.
const Kernels& kernels_for(SimdLevel level);

// Per-level tables, defined in kernels_<level>.cpp. The AVX ones are only valid to call on CPUs
// that support them.
const Kernels& scalar_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();
const Kernels& avx512bf16_kernels();

}  // namespace brigade::cpu
