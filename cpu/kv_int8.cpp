#include "cpu/kv_int8.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace brigade::cpu {

float kv_int8_scale(float absmax) {
  if (!(absmax > 0.0f)) return std::ldexp(1.0f, kKvInt8MinExp);
  if (std::isinf(absmax)) return std::ldexp(1.0f, kKvInt8MaxExp);
  int p = 0;
  std::frexp(absmax, &p);  // absmax = f * 2^p, f in [0.5, 1): absmax < 2^p = 128 * 2^(p - 7)
  return std::ldexp(1.0f, std::clamp(p - 7, kKvInt8MinExp, kKvInt8MaxExp));
}

float kv_int8_absmax(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

void kv_int8_quantize(const float* x, float scale, int8_t* q, int64_t n) {
  const float inv = 1.0f / scale;  // exact: scale is a power of two
  for (int64_t i = 0; i < n; ++i) {
    // fmax/fmin map NaN to -128 rather than into an undefined float -> int conversion.
    const float f = std::fmin(std::fmax(std::floor(x[i] * inv), -128.0f), 127.0f);
    q[i] = static_cast<int8_t>(f);
  }
}

void kv_int8_requantize(int8_t* q, float from, float to, int64_t n) {
  BRIGADE_CHECK(from > 0.0f && to >= from, "an int8 KV scale only grows");
  // A shift of 8 or more leaves 0 or -1 (the floor of q / 2^k) for any int8: clamp it there.
  const int shift = std::min(8, std::ilogb(to) - std::ilogb(from));
  if (shift == 0) return;
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(q[i] >> shift);  // arithmetic: floor
}

namespace {

// The rows of one call that land in one page, in slot order: pairs (slot, row).
struct PageGroup {
  int64_t page;
  size_t begin, end;  // into the sorted (slot, row) list
};

// Grows the scale of (page, head) of one of K or V to cover the group's tokens and stores them.
// `src_offset` is where that head's values start within a qkv row.
void write_head(const std::vector<std::pair<int32_t, int64_t>>& writes, const PageGroup& g,
                const float* qkv, int64_t row_width, int64_t src_offset, const Tensor& cache,
                const Tensor& scales, int64_t head) {
  const int64_t page_size = cache.dim(1), n_kv = cache.dim(2), d = cache.dim(3);
  int8_t* page = cache.as<int8_t>() + g.page * page_size * n_kv * d;
  float& scale = scales.as<float>()[g.page * n_kv + head];
  const bool fresh = writes[g.begin].first % page_size == 0;
  const float old = fresh ? 0.0f : scale;
  float absmax = 0.0f;
  for (size_t w = g.begin; w < g.end; ++w)
    absmax = std::fmax(absmax, kv_int8_absmax(qkv + writes[w].second * row_width + src_offset, d));
  const float s = std::max(old, kv_int8_scale(absmax));
  if (old > 0.0f && s > old) {
    for (int64_t slot = 0; slot < page_size; ++slot) kv_int8_requantize(page + (slot * n_kv + head) * d, old, s, d);
  }
  for (size_t w = g.begin; w < g.end; ++w) {
    const int64_t offset = writes[w].first % page_size;
    kv_int8_quantize(qkv + writes[w].second * row_width + src_offset, s, page + (offset * n_kv + head) * d, d);
  }
  scale = s;
}

}  // namespace

void write_kv_int8(const CpuContext& c, const KvLayer& cache, const Tensor& qkv, const QkvLayout& l,
                   const Tensor& slots) {
  const int64_t n = qkv.dim(0), page_size = cache.k.dim(1), n_pages = cache.k.dim(0);
  BRIGADE_CHECK(cache.k.dtype == DType::i8 && cache.v.dtype == DType::i8, "write_kv_int8: an i8 cache");
  BRIGADE_CHECK(cache.k_scale.dtype == DType::f32 && cache.k_scale.numel() == n_pages * l.n_kv_heads &&
                    cache.v_scale.dtype == DType::f32 && cache.v_scale.numel() == n_pages * l.n_kv_heads,
                "int8 KV has k_scale and v_scale [n_pages, n_kv_heads] f32");
  const auto* slot = slots.as<const int32_t>();
  std::vector<std::pair<int32_t, int64_t>> writes;
  for (int64_t i = 0; i < n; ++i) {
    if (slot[i] < 0) continue;
    BRIGADE_CHECK(slot[i] < n_pages * page_size, "write_kv: slot inside the KV pool");
    writes.emplace_back(slot[i], i);
  }
  std::stable_sort(writes.begin(), writes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<PageGroup> groups;
  for (size_t w = 0; w < writes.size(); ++w) {
    const int64_t page = writes[w].first / page_size;
    if (groups.empty() || groups.back().page != page) groups.push_back({page, w, w});
    groups.back().end = w + 1;
  }
  // Work item = (group, kv head, K or V): disjoint bytes and scales, so no two items race.
  const int64_t n_kv = l.n_kv_heads, per_group = 2 * n_kv;
  const int64_t row_width = l.row_width(), k_offset = l.q_width(), v_offset = l.q_width() + l.kv_width();
  const float* src = qkv.as<const float>();
  c.pool->parallel_for(static_cast<int64_t>(groups.size()) * per_group, 4, [&](int64_t b, int64_t e, int) {
    for (int64_t item = b; item < e; ++item) {
      const PageGroup& g = groups[static_cast<size_t>(item / per_group)];
      const int64_t head = item % n_kv;
      const bool is_v = item % per_group >= n_kv;
      write_head(writes, g, src, row_width, (is_v ? v_offset : k_offset) + head * l.head_dim,
                 is_v ? cache.v : cache.k, is_v ? cache.v_scale : cache.k_scale, head);
    }
  });
}

}  // namespace brigade::cpu
