// DeepSeek Sparse Attention ops (Backend::write_kv_columns, dsa_topk, mla_sparse_attention in
// core/backend.h; models/dsa_indexer.h runs them).
//
// dsa_topk scores every visible position of a query row (one task per row: the row's q heads
// against each cached index key, relu, weighted sum) and keeps the topk best, ties to the lower
// position, listed ascending. mla_sparse_attention is mla_attention's online softmax over the
// listed positions only, one task per (row, head); the value is the latent row itself.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

bool is_float_kv(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// Where query row t of a step sits: its sequence and its position (the rows of a sequence are
// the tail of its context).
struct RowPlace {
  int seq = 0;
  int pos = 0;
};

RowPlace place_of_row(const AttentionMeta& meta, int t) {
  const auto* q_start = meta.q_start.as<const int32_t>();
  const auto* ctx_len = meta.ctx_len.as<const int32_t>();
  int s = 0;
  while (s + 1 < meta.n_seqs && q_start[s + 1] <= t) ++s;
  return {s, ctx_len[s] - (q_start[s + 1] - q_start[s]) + (t - q_start[s])};
}

// Cache row of position p of sequence s, as f32 in `dst` (columns [col, col + n)).
void read_row(const CpuContext& c, const KvLayer& cache, const AttentionMeta& meta, int s, int p, int col, int n,
              float* dst) {
  const int64_t page_size = cache.k.dim(1), width = cache.k.dim(3);
  const int64_t max_blocks = meta.block_table.ndim >= 2 ? meta.block_table.dim(1) : meta.block_table.numel();
  const int32_t page = meta.block_table.as<const int32_t>()[s * max_blocks + p / page_size];
  const size_t esize = dtype_size(cache.k.dtype);
  const char* row = static_cast<const char*>(cache.k.data) + static_cast<size_t>((page * page_size + p % page_size) * width + col) * esize;
  c.kernels->to_f32(row, cache.k.dtype, dst, n);
}

void check_latent_cache(const KvLayer& cache, int64_t min_width, const char* op) {
  BRIGADE_CHECK(cache.v.empty() && cache.k.ndim == 4 && cache.k.dim(2) == 1 && cache.k.dim(3) >= min_width &&
                    is_float_kv(cache.k.dtype),
                op);
}

}  // namespace

void write_kv_columns(const CpuContext& c, const KvLayer& cache, const Tensor& x, int col, const Tensor& slots) {
  const int64_t n = x.dim(0), d = x.row_numel();
  check_latent_cache(cache, col + d, "write_kv_columns: a float latent cache [n_pages, page_size, 1, >= col + d]");
  BRIGADE_CHECK(col >= 0 && x.dtype == DType::f32 && slots.numel() == n, "write_kv_columns: x [n, d] f32, slots [n]");
  const int64_t w = cache.k.dim(3), n_slots = cache.k.dim(0) * cache.k.dim(1);
  const auto* slot = slots.as<const int32_t>();
  const size_t esize = dtype_size(cache.k.dtype);
  for (int64_t i = 0; i < n; ++i) {
    if (slot[i] < 0) continue;
    BRIGADE_CHECK(slot[i] < n_slots, "write_kv_columns: slot inside the KV pool");
    char* row = static_cast<char*>(cache.k.data) + static_cast<size_t>(slot[i] * w + col) * esize;
    c.kernels->from_f32(x.as<const float>() + i * d, cache.k.dtype, row, d);
  }
}

void dsa_topk(const CpuContext& c, const Tensor& q, const Tensor& weights, const KvLayer& cache, const DsaLayout& l,
              const AttentionMeta& meta, const Tensor& out) {
  const int64_t n = q.dim(0), h_count = l.n_heads, d = l.head_dim;
  BRIGADE_CHECK(q.dtype == DType::f32 && weights.dtype == DType::f32 && out.dtype == DType::i32,
                "dsa_topk: q, weights f32, out i32");
  BRIGADE_CHECK(q.row_numel() == h_count * d && weights.row_numel() == h_count && weights.dim(0) == n &&
                    out.row_numel() == l.topk && out.dim(0) == n && l.topk > 0,
                "dsa_topk: q [n, H D], weights [n, H], out [n, topk]");
  check_latent_cache(cache, l.col + d, "dsa_topk: a float latent cache [n_pages, page_size, 1, >= col + D]");
  c.pool->parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    std::vector<float> key(static_cast<size_t>(d)), score;
    std::vector<int32_t> order;
    for (int64_t t = b; t < e; ++t) {
      const RowPlace at = place_of_row(meta, static_cast<int>(t));
      const float* qt = q.as<const float>() + t * h_count * d;
      const float* wt = weights.as<const float>() + t * h_count;
      score.assign(static_cast<size_t>(at.pos + 1), 0.0f);
      for (int p = 0; p <= at.pos; ++p) {
        read_row(c, cache, meta, at.seq, p, l.col, static_cast<int>(d), key.data());
        float sum = 0.0f;
        for (int64_t h = 0; h < h_count; ++h) {
          const float dot = std::inner_product(key.begin(), key.end(), qt + h * d, 0.0f);
          sum += wt[h] * std::max(dot, 0.0f);
        }
        score[static_cast<size_t>(p)] = sum * l.scale;
      }
      order.resize(score.size());
      std::iota(order.begin(), order.end(), 0);
      const size_t k = std::min(order.size(), static_cast<size_t>(l.topk));
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), [&](int32_t x, int32_t y) {
        return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)] ||
               (score[static_cast<size_t>(x)] == score[static_cast<size_t>(y)] && x < y);
      });
      std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
      int32_t* o = out.as<int32_t>() + t * l.topk;
      for (int j = 0; j < l.topk; ++j) o[j] = static_cast<size_t>(j) < k ? order[static_cast<size_t>(j)] : -1;
    }
  });
}

void mla_sparse_attention(const CpuContext& c, const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l,
                          const KvLayer& cache, const AttentionMeta& meta, const Tensor& indices, float scale,
                          const Tensor& out) {
  const int64_t n = q_lat.dim(0), h_count = l.n_heads, r = l.kv_lora_rank, dr = l.rope_dim, w = l.row_width();
  BRIGADE_CHECK(q_lat.dtype == DType::f32 && q_pe.dtype == DType::f32 && out.dtype == DType::f32 &&
                    indices.dtype == DType::i32 && indices.dim(0) == n,
                "mla_sparse_attention: f32 activations, indices [n, k] i32");
  BRIGADE_CHECK(q_lat.row_numel() == h_count * r && q_pe.row_numel() == h_count * dr && out.row_numel() == h_count * r,
                "mla_sparse_attention: q_lat [n, H R], q_pe [n, H rope_dim], out [n, H R]");
  BRIGADE_CHECK(cache.k.ndim == 4 && cache.k.dim(3) == w, "mla_sparse_attention: latent rows of R + rope_dim");
  check_latent_cache(cache, w, "mla_sparse_attention: a float latent cache [n_pages, page_size, 1, R + rope_dim]");
  const int64_t k = indices.row_numel();
  c.pool->parallel_for(n * h_count, 1, [&](int64_t b, int64_t e, int) {
    std::vector<float> row(static_cast<size_t>(w)), acc(static_cast<size_t>(r));
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / h_count, h = i % h_count;
      const RowPlace at = place_of_row(meta, static_cast<int>(t));
      const float* ql = q_lat.as<const float>() + (t * h_count + h) * r;
      const float* qp = q_pe.as<const float>() + (t * h_count + h) * dr;
      std::fill(acc.begin(), acc.end(), 0.0f);
      float m = -INFINITY, sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t p = indices.as<const int32_t>()[t * k + j];
        if (p < 0) continue;
        BRIGADE_CHECK(p <= at.pos, "mla_sparse_attention: indices within the row's causal context");
        read_row(c, cache, meta, at.seq, p, 0, static_cast<int>(w), row.data());
        const float s = scale * (std::inner_product(ql, ql + r, row.begin(), 0.0f) +
                                 std::inner_product(qp, qp + dr, row.begin() + r, 0.0f));
        const float m_new = std::max(m, s), corr = std::exp(m - m_new), p_s = std::exp(s - m_new);
        sum = sum * corr + p_s;
        for (int64_t x = 0; x < r; ++x) acc[static_cast<size_t>(x)] = acc[static_cast<size_t>(x)] * corr + p_s * row[static_cast<size_t>(x)];
        m = m_new;
      }
      float* o = out.as<float>() + (t * h_count + h) * r;
      for (int64_t x = 0; x < r; ++x) o[x] = sum > 0.0f ? acc[static_cast<size_t>(x)] / sum : 0.0f;
    }
  });
}

}  // namespace brigade::cpu
