// Portable kernels (the reference every SIMD level is tested against) and the level selection.
#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include <spdlog/spdlog.h>

#include "core/status.h"
#include "cpu/kernels.h"

namespace brigade::cpu {
namespace {

float load_as_f32(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: BRIGADE_CHECK(false, "element type is f32, bf16 or f16");
  }
  return 0.0f;
}

void matmul_rows(const MatmulArgs& a, int64_t m_begin, int64_t m_end) {
  const size_t esize = dtype_size(a.w_dtype);
  for (int64_t r = m_begin; r < m_end; ++r) {
    const void* w = static_cast<const char*>(a.w) + static_cast<size_t>(r * a.k) * esize;
    for (int64_t i = 0; i < a.n; ++i) {
      const float* x = a.x + i * a.k;
      float s = 0.0f;
      for (int64_t j = 0; j < a.k; ++j) s += x[j] * load_as_f32(w, a.w_dtype, j);
      a.out[i * a.m + r] = s;
    }
  }
}

void to_f32(const void* src, DType t, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(src, t, i);
}

void from_f32(const float* src, DType t, void* dst, int64_t n) {
  switch (t) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return;
    default: BRIGADE_CHECK(false, "from_f32 writes f32, bf16 or f16");
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void scale_axpy(float* y, float scale, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * scale + a * x[i];
}

// Element j of a KV row of type t as f32 (i8: times the row's scale).
float kv_at(const char* row, DType t, float scale, int64_t j) {
  switch (t) {
    case DType::f32: return reinterpret_cast<const float*>(row)[j];
    case DType::bf16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[j]);
    case DType::f16: return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[j]);
    case DType::i8: return static_cast<float>(reinterpret_cast<const int8_t*>(row)[j]) * scale;
    default: BRIGADE_CHECK(false, "KV rows are f32, bf16, f16 or i8");
  }
  return 0.0f;
}

// Calls f(t, row, scale) for the rows of r's runs in order, t counted across them.
template <typename F>
void for_each_row(const KvRows& r, F&& f) {
  const int64_t row_bytes = r.stride_bytes();
  int64_t t = 0;
  for (int64_t k = 0; k < r.n_runs; ++k)
    for (int64_t i = 0; i < r.runs[k].n; ++i, ++t)
      f(t, static_cast<const char*>(r.runs[k].base) + i * row_bytes,
        r.dtype == DType::i8 ? r.runs[k].scales[i * r.scale_stride] : 1.0f);
}

void transpose_keys(const KvRows& k, int64_t d, float* kt, int64_t ldk) {
  int64_t n_t = 0;
  for_each_row(k, [&](int64_t t, const char* row, float scale) {
    for (int64_t j = 0; j < d; ++j) kt[j * ldk + t] = kv_at(row, k.dtype, scale, j);
    n_t = t + 1;
  });
  for (int64_t j = 0; j < d; ++j)
    for (int64_t t = n_t; t < (n_t + 15) / 16 * 16; ++t) kt[j * ldk + t] = 0.0f;
}

void attend_scores(const float* q, int64_t nq, const float* kt, int64_t ldk, int64_t n_pos, int64_t d, float* m,
                   float* l, float* alpha, float* scores, float softcap, const ScoreBias* bias) {
  for (int64_t i = 0; i < nq; ++i) {
    float* sc = scores + i * ldk;
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < n_pos; ++t) {
      float s = 0.0f;
      for (int64_t j = 0; j < d; ++j) s += q[i * d + j] * kt[j * ldk + t];
      sc[t] = softcap > 0.0f ? std::tanh(s / softcap) * softcap : s;
      if (bias != nullptr) sc[t] += bias->slope[i] * static_cast<float>(static_cast<int32_t>(t) + bias->offset[i]);
      tile_max = std::max(tile_max, sc[t]);
    }
    const float new_m = std::max(m[i], tile_max);
    alpha[i] = std::exp(m[i] - new_m);  // 0 on the first tile (m = -inf)
    float sum = 0.0f;
    for (int64_t t = 0; t < n_pos; ++t) sum += (sc[t] = std::exp(sc[t] - new_m));
    l[i] = l[i] * alpha[i] + sum;
    m[i] = new_m;
  }
}

void attend_values(const float* scores, int64_t ld_scores, int64_t nq, const KvRows& v, int64_t d, const float* alpha,
                   float* acc) {
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 0; j < d; ++j) {
      float a = alpha != nullptr ? acc[i * d + j] * alpha[i] : acc[i * d + j];
      for_each_row(v, [&](int64_t t, const char* row, float scale) { a += scores[i * ld_scores + t] * kv_at(row, v.dtype, scale, j); });
      acc[i * d + j] = a;
    }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void ssm_diag_rows(float* s, const float* a, const float* dt, const float* x, const float* b, const float* c,
                   int64_t nd, int64_t n, float* y) {
  for (int64_t d = 0; d < nd; ++d) {
    float* row = s + d * n;
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = std::exp(dt[d] * a[d * n + j]) * row[j] + dt[d] * x[d] * b[j];
      sum += row[j] * c[j];
    }
    y[d] = sum;
  }
}

void gelu_erf(float* x, int64_t n) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

float gelu_tanh_one(float x) {
  constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
  constexpr float kKappa = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kBeta * (x + kKappa * x * x * x)));
}

void gelu_tanh(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_tanh_one(x[i]);
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh_one(gate[i]) * up[i];
}

}  // namespace

const Kernels& scalar_kernels() {
  static const Kernels table{SimdLevel::scalar, matmul_rows, to_f32, from_f32, silu_mul, dot,
                             scale_axpy, scalar_q::quantize_q8,
                             scalar_q::qmatmul_rows, scalar_q::qmatmul_rows, nullptr,
                             scalar_q::quantize_q8k, scalar_q::qkmatmul_rows, transpose_keys, attend_scores,
                             attend_values, gelu_erf, ssm_diag_rows, gelu_tanh, gelu_tanh_mul};
  return table;
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return "scalar";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
    case SimdLevel::avx512bf16: return "avx512bf16";
  }
  return "?";
}

SimdLevel detect_simd_level() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c") &&
                      __builtin_cpu_supports("fma");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return SimdLevel::avx512bf16;
  if (avx512) return SimdLevel::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return SimdLevel::avx2;
#endif
  return SimdLevel::scalar;
}

SimdLevel simd_level_from_env() {
  const SimdLevel best = detect_simd_level();
  const char* env = std::getenv("BRIGADE_SIMD");
  if (env == nullptr || *env == '\0') return best;
  const std::string_view want(env);
  SimdLevel asked = best;
  if (want == "scalar") asked = SimdLevel::scalar;
  else if (want == "avx2") asked = SimdLevel::avx2;
  else if (want == "avx512") asked = SimdLevel::avx512;
  else if (want == "avx512bf16") asked = SimdLevel::avx512bf16;
  else
    spdlog::warn("BRIGADE_SIMD={} is not one of scalar, avx2, avx512, avx512bf16; using {}", want,
                 simd_level_name(best));
  if (asked > best) {
    spdlog::warn("BRIGADE_SIMD={}: this CPU supports up to {}; using that", want,
                 simd_level_name(best));
    return best;
  }
  return asked;
}

const Kernels& kernels_for(SimdLevel level) {
  switch (std::min(level, detect_simd_level())) {
    case SimdLevel::avx512bf16: return avx512bf16_kernels();
    case SimdLevel::avx512: return avx512_kernels();
    case SimdLevel::avx2: return avx2_kernels();
    case SimdLevel::scalar: break;
  }
  return scalar_kernels();
}

}  // namespace brigade::cpu
