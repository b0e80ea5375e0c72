#include "cpu/kv_int8.h"

#include <cmath>
#include <limits>

namespace brigade::cpu {

float kv_int8_scale(float absmax) {
  if (!(absmax > 0.0f)) return 0.0f;
  if (std::isinf(absmax)) return std::numeric_limits<float>::max() / 127.0f;
  return absmax / 127.0f;
}

float kv_int8_absmax(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

void kv_int8_quantize(const float* x, float scale, int8_t* q, int64_t n) {
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * inv;
    // NaN -> 0; the clamp keeps the float -> int conversion defined (and saturates infinities).
    q[i] = v == v ? static_cast<int8_t>(std::nearbyint(std::fmin(std::fmax(v, -127.0f), 127.0f))) : 0;
  }
}

void write_kv_int8(const CpuContext& c, const KvLayer& cache, const Tensor& qkv, const QkvLayout& l,
                   const Tensor& slots) {
  const int64_t n = qkv.dim(0), page_size = cache.k.dim(1), n_pages = cache.k.dim(0);
  const int64_t n_kv = l.n_kv_heads, d = l.head_dim;
  BRIGADE_CHECK(cache.k.dtype == DType::i8 && cache.v.dtype == DType::i8, "write_kv_int8: an i8 cache");
  BRIGADE_CHECK(cache.k_scale.dtype == DType::f32 && cache.k_scale.numel() == n_pages * page_size * n_kv &&
                    cache.v_scale.dtype == DType::f32 && cache.v_scale.numel() == n_pages * page_size * n_kv,
                "int8 KV has k_scale and v_scale [n_pages, page_size, n_kv_heads] f32");
  const auto* slot = slots.as<const int32_t>();
  for (int64_t i = 0; i < n; ++i)
    BRIGADE_CHECK(slot[i] < n_pages * page_size, "write_kv: slot inside the KV pool");
  const int64_t row_width = l.row_width(), k_offset = l.q_width(), v_offset = l.q_width() + l.kv_width();
  const float* src = qkv.as<const float>();
  // Work item = one token: its K and V rows of every kv head (disjoint slots; negative = skip).
  c.pool->parallel_for(n, 8, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      if (slot[i] < 0) continue;
      for (int64_t h = 0; h < n_kv; ++h) {
        const int64_t row = slot[i] * n_kv + h;  // (page * page_size + offset) * n_kv + head
        for (int is_v = 0; is_v < 2; ++is_v) {
          const float* x = src + i * row_width + (is_v ? v_offset : k_offset) + h * d;
          const float s = kv_int8_scale(kv_int8_absmax(x, d));
          (is_v ? cache.v_scale : cache.k_scale).as<float>()[row] = s;
          kv_int8_quantize(x, s, (is_v ? cache.v : cache.k).as<int8_t>() + row * d, d);
        }
      }
    }
  });
}

}  // namespace brigade::cpu
