// MLA ops (Backend::head_matmul, write_mla_kv, mla_attention in core/backend.h).
//
// head_matmul gathers each head's columns into contiguous rows and runs the matmul kernels per
// head: decode (fewer than kBlasMinRows rows) splits all heads' weight rows over the threads in
// one dispatch, as matmul's decode path does; longer runs take matmul per head (BLAS panels).
// mla_attention is the paged-attention core of attention.cpp over the latent cache with one "kv
// head" shared by every query head: the query is [q_lat | q_pe] (R + rope_dim, one dot product
// against the cached row [c | k_pe]) and the value is the row itself, of which the first R
// outputs are kept (the rope_dim tail of the accumulator is computed and dropped: 11% more
// accumulate work at DeepSeek's 512 + 64, against a second pass over the pages).
#include <algorithm>
#include <vector>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

bool is_float_kv(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

}  // namespace

void head_matmul(const CpuContext& c, const Tensor& x, const Tensor& w, int n_heads, const Tensor& out) {
  const int64_t n = x.dim(0), h_count = n_heads;
  BRIGADE_CHECK(n_heads > 0 && x.dtype == DType::f32 && out.dtype == DType::f32 && x.row_numel() % n_heads == 0 &&
                    w.dim(0) % n_heads == 0, "head_matmul: x [n, H a] f32, w [H b, a], out [n, H b] f32");
  const int64_t a = x.row_numel() / n_heads, b = w.dim(0) / n_heads;
  BRIGADE_CHECK(w.row_numel() == a && out.row_numel() == h_count * b && out.dim(0) == n,
                "head_matmul: w [H b, a] and out [n, H b]");
  if (n == 0) return;
  thread_local std::vector<float> xs, ys;  // [H, n, a] and [H, n, b]: per head contiguous rows
  xs.resize(static_cast<size_t>(h_count * n * a));
  ys.resize(static_cast<size_t>(h_count * n * b));
  const float* xp = x.as<const float>();
  float* xg = xs.data();
  float* yg = ys.data();
  for (int64_t h = 0; h < h_count; ++h)
    for (int64_t t = 0; t < n; ++t) std::copy_n(xp + t * h_count * a + h * a, a, xg + (h * n + t) * a);
  const int64_t row_bytes = a * static_cast<int64_t>(dtype_size(w.dtype));
  if (n < kBlasMinRows) {
    const int64_t grain = std::max<int64_t>(4, (65536 / std::max<int64_t>(1, row_bytes)) & ~int64_t{3});
    c.pool->parallel_for(h_count * b, grain, [&](int64_t g0, int64_t g1, int) {
      for (int64_t g = g0; g < g1;) {
        const int64_t h = g / b, r0 = g % b, r1 = std::min(b, r0 + (g1 - g));
        MatmulArgs m;
        m.x = xg + h * n * a;
        m.n = n;
        m.k = a;
        m.w = static_cast<const char*>(w.data) + h * b * row_bytes;
        m.w_dtype = w.dtype;
        m.m = b;
        m.out = yg + h * n * b;
        c.kernels->matmul_rows(m, r0, r1);
        g += r1 - r0;
      }
    });
  } else {
    for (int64_t h = 0; h < h_count; ++h)
      matmul(c, Tensor(xg + h * n * a, DType::f32, {n, a}), w.rows(h * b, b), Tensor(),
             Tensor(yg + h * n * b, DType::f32, {n, b}));
  }
  float* op = out.as<float>();
  for (int64_t h = 0; h < h_count; ++h)
    for (int64_t t = 0; t < n; ++t) std::copy_n(yg + (h * n + t) * b, b, op + t * h_count * b + h * b);
}

void write_mla_kv(const CpuContext& c, const KvLayer& cache, const Tensor& latent, const Tensor& k_pe,
                  const Tensor& slots) {
  const int64_t n = latent.dim(0), r = latent.row_numel(), dr = k_pe.row_numel(), w = r + dr;
  const int64_t n_slots = cache.k.dim(0) * cache.k.dim(1);
  BRIGADE_CHECK(cache.v.empty() && cache.k.ndim == 4 && cache.k.dim(2) == 1 && cache.k.dim(3) == w,
                "write_mla_kv: a latent cache [n_pages, page_size, 1, R + rope_dim] without V");
  BRIGADE_CHECK(latent.dtype == DType::f32 && k_pe.dtype == DType::f32 && k_pe.dim(0) == n && slots.numel() == n,
                "write_mla_kv: latent [n, R], k_pe [n, rope_dim] f32, slots [n]");
  BRIGADE_CHECK(is_float_kv(cache.k.dtype), "write_mla_kv: a float latent cache");
  const auto* slot = slots.as<const int32_t>();
  const size_t esize = dtype_size(cache.k.dtype);
  c.pool->parallel_for(n, std::max<int64_t>(1, 16384 / w), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      if (slot[i] < 0) continue;
      BRIGADE_CHECK(slot[i] < n_slots, "write_mla_kv: slot inside the KV pool");
      char* row = static_cast<char*>(cache.k.data) + static_cast<size_t>(slot[i] * w) * esize;
      c.kernels->from_f32(latent.as<const float>() + i * r, cache.k.dtype, row, r);
      c.kernels->from_f32(k_pe.as<const float>() + i * dr, cache.k.dtype, row + static_cast<size_t>(r) * esize, dr);
    }
  });
}

void mla_attention(const CpuContext& c, const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l,
                   const KvLayer& cache, const AttentionMeta& meta, float scale, const Tensor& out) {
  const int64_t n = q_lat.dim(0), h_count = l.n_heads, r = l.kv_lora_rank, dr = l.rope_dim, w = l.row_width();
  BRIGADE_CHECK(q_lat.dtype == DType::f32 && q_pe.dtype == DType::f32 && out.dtype == DType::f32,
                "mla_attention activations are f32");
  BRIGADE_CHECK(q_lat.row_numel() == h_count * r && q_pe.row_numel() == h_count * dr && q_pe.dim(0) == n &&
                    out.row_numel() == h_count * r && out.dim(0) == n,
                "mla_attention: q_lat [n, H R], q_pe [n, H rope_dim], out [n, H R]");
  BRIGADE_CHECK(cache.v.empty() && cache.k.ndim == 4 && cache.k.dim(2) == 1 && cache.k.dim(3) == w &&
                    is_float_kv(cache.k.dtype), "mla_attention: a float latent cache [n_pages, page_size, 1, R + rope_dim]");
  BRIGADE_CHECK(meta.sliding_window == 0, "mla_attention: no sliding window");
  thread_local std::vector<float> q;  // [n, H, R + rope_dim]
  q.resize(static_cast<size_t>(n * h_count * w));
  float* qp = q.data();  // this thread's buffer: the workers below must not name the thread_local
  c.pool->parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t)
      for (int64_t h = 0; h < h_count; ++h) {
        float* dst = qp + (t * h_count + h) * w;
        std::copy_n(q_lat.as<const float>() + (t * h_count + h) * r, r, dst);
        std::copy_n(q_pe.as<const float>() + (t * h_count + h) * dr, dr, dst + r);
      }
  });
  KvLayer latent = cache;
  latent.v = cache.k;  // the value is the row itself; out keeps its first R
  PagedAttentionArgs a;
  a.q = qp;
  a.row_width = h_count * w;
  a.n_kv = 1;
  a.group = l.n_heads;
  a.head_dim = static_cast<int>(w);
  a.out_dim = l.kv_lora_rank;
  a.out = out.as<float>();
  a.out_width = h_count * r;
  a.scale = scale;
  paged_attention(c, a, latent, meta);
}

}  // namespace brigade::cpu
