// Paged attention for a batch of sequences, each a prefill chunk over a cached prefix or a
// single decode token (AttentionMeta in core/backend.h).
//
// Work item = (sequence, kv head, block of up to kQBlock query rows). An item walks the KV
// positions its rows can see once, a tile of kTile positions at a time, reading the cache where
// it is: the tile's keys are transposed straight from their pages, in the cache's dtype
// (Kernels::transpose_keys: f32, bf16/f16 widened, int8 dequantized with each row's own scale,
// cpu/kv_int8.h), and the values are read from their pages by the PV kernel. The rows that see
// the whole tile (every tile before the diagonal) score it in one call with all their query
// heads sharing that kv head (GQA), kLanes keys per vector (Kernels::attend_scores, then
// Kernels::attend_values). Each query keeps an online softmax (running max m, sum l,
// unnormalised output acc), so no [n_q, ctx] matrix exists.

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <xmmintrin.h>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

constexpr int kQBlock = 16;
// Keys per tile: positions [64 i, 64 i + 64), from however many pages hold them.
constexpr int64_t kTile = 64;
constexpr int64_t kLdk = kTile + 16;  // the transposed keys' row stride (Kernels::transpose_keys)

struct Item {
  int seq;
  int kv_head;
  int row_begin;  // query rows [row_begin, row_end) within the sequence
  int row_end;
};

struct Shape {
  int64_t page_size, n_kv, head_dim, group, row_width, max_blocks;
  int64_t out_dim;    // leading dims of each head's output written (head_dim; MLA: the latent's)
  int64_t out_width;  // out row stride
  int sliding_window;
  int chunk;  // AttentionMeta::chunk
  float scale;
  float softcap;  // AttentionMeta::softcap
  const float* sinks;  // [n_kv * group] AttentionMeta::sinks, or null
  const float* alibi;  // [n_kv * group] AttentionMeta::alibi_slopes, or null
  const int32_t* attend_until;  // [n_tokens] AttentionMeta::attend_until, or null (causal)
};

// KV positions a query row may attend to.
struct QueryRange {
  int64_t lo, hi;  // visible KV positions [lo, hi], inclusive
};

// Row `row` (of the step) at position pos: causal up to pos, or up to attend_until[row] where
// that is later; the sliding window and the start of pos's chunk bound it from below.
QueryRange visible(const Shape& s, int64_t row, int64_t pos) {
  const int64_t hi = s.attend_until != nullptr ? std::max<int64_t>(pos, s.attend_until[row]) : pos;
  int64_t lo = s.sliding_window > 0 ? std::max<int64_t>(0, pos - s.sliding_window + 1) : 0;
  if (s.chunk > 0) lo = std::max(lo, pos - pos % s.chunk);
  return {lo, hi};
}

// Address of the K or V vector [head_dim] of (page, slot, kv head), any cache dtype.
const void* kv_row(const Tensor& t, const Shape& s, int64_t page, int64_t slot, int64_t head) {
  const int64_t idx = ((page * s.page_size + slot) * s.n_kv + head) * s.head_dim;
  return static_cast<const char*>(t.data) + static_cast<size_t>(idx) * dtype_size(t.dtype);
}

// One kv head's rows of K or V (`t`, int8 row scales `scale`) at positions [p0, p1): a run per
// page, into runs (kTile of them at most, for pages of one position).
KvRows rows_of(const Tensor& t, const Tensor& scale, const Shape& s, const int32_t* table, int64_t p0, int64_t p1,
               int64_t head, KvRun* runs) {
  KvRows r;
  r.dtype = t.dtype;
  r.stride = s.n_kv * s.head_dim;
  r.scale_stride = s.n_kv;
  r.runs = runs;
  for (int64_t p = p0; p < p1;) {
    const int64_t page = table[p / s.page_size], slot = p % s.page_size, n = std::min(p1 - p, s.page_size - slot);
    const int64_t at = (page * s.page_size + slot) * s.n_kv + head;  // the run's first row
    runs[r.n_runs++] = {kv_row(t, s, page, slot, head), t.dtype == DType::i8 ? scale.as<const float>() + at : nullptr, n};
    p += n;
  }
  return r;
}

// Pulls one kv head's K and V rows at positions [p0, p1) toward the caches while the current tile
// is scored: the rows are head_dim elements at a stride of n_kv_heads * head_dim, across pages, a
// pattern the hardware prefetcher does not follow (profiling showed half the time stalled there).
void prefetch_rows(const KvLayer& cache, const Shape& s, const int32_t* table, int64_t p0, int64_t p1, int64_t head) {
  KvRun runs[kTile];
  const int64_t row_bytes = s.head_dim * static_cast<int64_t>(dtype_size(cache.k.dtype));
  for (const auto& [t, scale] : {std::pair{&cache.k, &cache.k_scale}, {&cache.v, &cache.v_scale}}) {
    const KvRows r = rows_of(*t, *scale, s, table, p0, p1, head, runs);
    const int64_t stride = r.stride_bytes();
    for (int64_t i = 0; i < r.n_runs; ++i)
      for (int64_t k = 0; k < runs[i].n; ++k)
        for (int64_t off = 0; off < row_bytes; off += 64)
          __builtin_prefetch(static_cast<const char*>(runs[i].base) + k * stride + off);
  }
}

// Flush-to-zero and denormals-are-zero (MXCSR bits 15 and 6) while it lives, the thread's MXCSR
// restored after; held by each worker over its items, not per tile (ldmxcsr twice a call). A key
// far below the tile's max gets an exp that underflows to a denormal, and every FMA that then
// meets it takes a microcode assist: on a random-weight Q5_K_M model, whose softmax is peaked, a
// 512-token prefill took 6.9 s instead of 3.3 s (docs/perf.md). Such terms are below 1.2e-38
// against a softmax sum of at least 1.
struct FlushDenormals {
  unsigned saved = _mm_getcsr();
  FlushDenormals() { _mm_setcsr(saved | 0x8040u); }
  ~FlushDenormals() { _mm_setcsr(saved); }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;
};

struct Scratch {
  std::vector<float> q, acc, m, l, scores, kt;
};

void run_item(const CpuContext& c, const Item& it, const Shape& s, const float* qkv, const KvLayer& cache,
              const int32_t* q_start, const int32_t* ctx_len, const int32_t* block_table, float* out) {
  thread_local Scratch sc;
  const Kernels& kn = *c.kernels;
  const int64_t d = s.head_dim;
  const int64_t n_q = q_start[it.seq + 1] - q_start[it.seq];
  const int64_t first_pos = ctx_len[it.seq] - n_q;
  const int64_t n_rows = it.row_end - it.row_begin;
  const int64_t nq = n_rows * s.group;  // queries in this item: row-major over (row, head)
  sc.q.resize(static_cast<size_t>(nq * d));
  // Outputs: the first out_dim columns of each value (MLA: the latent, not its rope part).
  const int64_t dv = s.out_dim;
  sc.acc.assign(static_cast<size_t>(nq * dv), 0.0f);
  sc.m.assign(static_cast<size_t>(nq), -std::numeric_limits<float>::infinity());
  sc.l.assign(static_cast<size_t>(nq), 0.0f);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* row = qkv + (q_start[it.seq] + it.row_begin + r) * s.row_width;
    for (int64_t h = 0; h < s.group; ++h) {
      const float* src = row + (it.kv_head * s.group + h) * d;
      float* dst = sc.q.data() + (r * s.group + h) * d;
      for (int64_t j = 0; j < d; ++j) dst[j] = src[j] * s.scale;
    }
  }
  alignas(64) float slope[kAttendMaxQueries];  // ALiBi: a call's queries' slopes and their distances
  alignas(64) int32_t offset[kAttendMaxQueries];
  const int64_t row0 = q_start[it.seq] + it.row_begin;  // the item's first row in the step
  auto range = [&](int64_t r) { return visible(s, row0 + r, first_pos + it.row_begin + r); };
  // The rows' ranges start in position order; with attend_until they may end in any order.
  const QueryRange first = range(0);
  QueryRange last = range(n_rows - 1);
  for (int64_t r = 0; r + 1 < n_rows; ++r) last.hi = std::max(last.hi, range(r).hi);
  // The tile's keys transposed ([d][kLdk], Kernels::transpose_keys): kTile columns, plus the 15 a
  // page's zero padding or attend_scores' last loads may reach past them, plus 16 floats past the
  // last row. Zeroed when (re)sized so that every float it can read is finite; later tiles leave
  // their (finite) keys behind in columns a shorter tile does not write.
  const size_t kt_size = static_cast<size_t>(d * kLdk + 16);
  if (sc.kt.size() != kt_size) sc.kt.assign(kt_size, 0.0f);
  sc.scores.resize(static_cast<size_t>(kAttendMaxQueries * kLdk));
  const int32_t* table = block_table + it.seq * s.max_blocks;
  KvRun k_runs[kTile], v_runs[kTile];
  alignas(64) float alpha[kAttendMaxQueries];
  // Tiles are the positions [t0, t0 + kTile) for t0 a multiple of kTile, whatever the page size.
  // A row sees the part [a, e) of a tile its range allows (causal or attend_until, and the
  // window), so the keys it is scored against, their order and the tile boundaries of its online
  // softmax depend only on that range: every row, decode or prefill, takes this one path, and its output does not depend
  // on how its sequence was split into steps, on the rows it shares an item with, or on the page
  // size (CpuAttention.ARowsOutputDependsOnItsPositionAloneBitForBit).
  for (int64_t t0 = first.lo / kTile * kTile; t0 <= last.hi; t0 += kTile) {
    const int64_t p0 = std::max(first.lo, t0), p1 = std::min(last.hi + 1, t0 + kTile);  // keys [p0, p1)
    kn.transpose_keys(rows_of(cache.k, cache.k_scale, s, table, p0, p1, it.kv_head, k_runs), d, sc.kt.data(), kLdk);
    if (t0 + kTile <= last.hi) prefetch_rows(cache, s, table, t0 + kTile, std::min(last.hi + 1, t0 + 2 * kTile), it.kv_head);
    // Consecutive rows that see the same part of the tile are scored together: all of them on
    // the tiles before the diagonal, one by one on it.
    for (int64_t r = 0; r < n_rows;) {
      const QueryRange qr = range(r);
      const int64_t a = std::max(p0, qr.lo), e = std::min(p1, qr.hi + 1);
      int64_t r_end = r + 1;
      for (; r_end < n_rows; ++r_end) {
        const QueryRange nr = range(r_end);
        if (std::max(p0, nr.lo) != a || std::min(p1, nr.hi + 1) != e) break;
      }
      if (a < e) {
        const KvRows v = rows_of(cache.v, cache.v_scale, s, table, a, e, it.kv_head, v_runs);
        for (int64_t q0 = r * s.group; q0 < r_end * s.group; q0 += kAttendMaxQueries) {
          const int64_t n = std::min(r_end * s.group - q0, kAttendMaxQueries);
          ScoreBias bias;
          if (s.alibi != nullptr) {  // query q is row q / group's head q % group
            for (int64_t i = 0; i < n; ++i) {
              const int64_t q = q0 + i;
              slope[i] = s.alibi[it.kv_head * s.group + q % s.group];
              offset[i] = static_cast<int32_t>(a - (first_pos + it.row_begin + q / s.group));
            }
            bias = {slope, offset};
          }
          kn.attend_scores(sc.q.data() + q0 * d, n, sc.kt.data() + (a - p0), kLdk, e - a, d,
                           &sc.m[static_cast<size_t>(q0)], &sc.l[static_cast<size_t>(q0)], alpha, sc.scores.data(),
                           s.softcap, s.alibi != nullptr ? &bias : nullptr);
          kn.attend_values(sc.scores.data(), kLdk, n, v, dv, alpha, sc.acc.data() + q0 * dv);
        }
      }
      r = r_end;
    }
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    float* dst_row = out + (q_start[it.seq] + it.row_begin + r) * s.out_width;
    for (int64_t h = 0; h < s.group; ++h) {
      const int64_t qi = r * s.group + h;
      // A sink adds exp(sink) to the denominator: with the running max m, l + exp(sink - m).
      const float sink = s.sinks != nullptr ? std::exp(s.sinks[it.kv_head * s.group + h] - sc.m[static_cast<size_t>(qi)]) : 0.0f;
      const float inv = 1.0f / (sc.l[static_cast<size_t>(qi)] + sink);
      const float* acc = sc.acc.data() + qi * dv;
      float* dst = dst_row + (it.kv_head * s.group + h) * s.out_dim;
      for (int64_t j = 0; j < s.out_dim; ++j) dst[j] = acc[j] * inv;
    }
  }
}

}  // namespace

void attention(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const KvLayer& cache,
               const AttentionMeta& meta, float scale, const Tensor& out) {
  BRIGADE_CHECK(qkv.dtype == DType::f32 && out.dtype == DType::f32, "attention activations are f32");
  BRIGADE_CHECK(l.n_kv_heads > 0 && l.n_heads % l.n_kv_heads == 0, "n_heads is a multiple of n_kv_heads");
  BRIGADE_CHECK(cache.k.ndim == 4 && cache.k.dim(2) == l.n_kv_heads && cache.k.dim(3) == l.head_dim,
                "KV layer is [n_pages, page_size, n_kv_heads, head_dim]");
  BRIGADE_CHECK(cache.k.dtype == cache.v.dtype, "K and V share a dtype");
  BRIGADE_CHECK(cache.k.dtype != DType::i8 ||
                    (cache.k_scale.numel() == cache.k.dim(0) * cache.k.dim(1) * l.n_kv_heads &&
                     cache.v_scale.numel() == cache.k.dim(0) * cache.k.dim(1) * l.n_kv_heads &&
                     cache.k_scale.dtype == DType::f32 && cache.v_scale.dtype == DType::f32),
                "int8 KV has k_scale and v_scale [n_pages, page_size, n_kv_heads] f32");
  BRIGADE_CHECK(qkv.row_numel() == l.row_width() && out.row_numel() == l.q_width(),
                "qkv is [n, row_width] and out is [n, n_heads * head_dim]");
  PagedAttentionArgs a;
  a.q = qkv.as<const float>();
  a.row_width = l.row_width();
  a.n_kv = l.n_kv_heads;
  a.group = l.n_heads / l.n_kv_heads;
  a.head_dim = l.head_dim;
  a.out_dim = l.head_dim;
  a.out = out.as<float>();
  a.out_width = l.q_width();
  a.scale = scale;
  BRIGADE_CHECK(meta.sinks.empty() || (meta.sinks.dtype == DType::f32 && meta.sinks.numel() == l.n_heads),
                "attention: sinks [n_heads] f32");
  a.sinks = meta.sinks.empty() ? nullptr : meta.sinks.as<const float>();
  BRIGADE_CHECK(meta.alibi_slopes.empty() ||
                    (meta.alibi_slopes.dtype == DType::f32 && meta.alibi_slopes.numel() == l.n_heads),
                "attention: alibi_slopes [n_heads] f32");
  a.alibi = meta.alibi_slopes.empty() ? nullptr : meta.alibi_slopes.as<const float>();
  paged_attention(c, a, cache, meta);
}

void paged_attention(const CpuContext& c, const PagedAttentionArgs& a, const KvLayer& cache, const AttentionMeta& meta) {
  const auto* q_start = meta.q_start.as<const int32_t>();
  const auto* ctx_len = meta.ctx_len.as<const int32_t>();
  Shape s;
  s.page_size = cache.k.dim(1);
  s.n_kv = a.n_kv;
  s.head_dim = a.head_dim;
  s.group = a.group;
  s.row_width = a.row_width;
  s.max_blocks = meta.block_table.ndim >= 2 ? meta.block_table.dim(1) : meta.block_table.numel();
  s.out_dim = a.out_dim;
  s.out_width = a.out_width;
  s.sliding_window = meta.sliding_window;
  s.chunk = meta.chunk;
  s.scale = a.scale;
  s.softcap = meta.softcap;
  s.sinks = a.sinks;
  s.alibi = a.alibi;
  s.attend_until = meta.attend_until.empty() ? nullptr : meta.attend_until.as<const int32_t>();
  std::vector<Item> items;
  for (int seq = 0; seq < meta.n_seqs; ++seq) {
    const int n_q = q_start[seq + 1] - q_start[seq];
    BRIGADE_CHECK(n_q <= ctx_len[seq], "a sequence's query rows are the tail of its context");
    for (int r = q_start[seq]; s.attend_until != nullptr && r < q_start[seq + 1]; ++r)
      BRIGADE_CHECK(s.attend_until[r] < ctx_len[seq], "attend_until: positions this step or an earlier one wrote");
    for (int g = 0; g < a.n_kv; ++g)
      for (int r = 0; r < n_q; r += kQBlock) items.push_back({seq, g, r, std::min(n_q, r + kQBlock)});
  }
  BRIGADE_CHECK(cache.k.dtype == DType::f32 || cache.k.dtype == DType::bf16 || cache.k.dtype == DType::f16 ||
                    cache.k.dtype == DType::i8, "KV cache dtype is f32, bf16, f16 or i8");
  c.pool->parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t b, int64_t e, int) {
    const FlushDenormals ftz;
    for (int64_t i = b; i < e; ++i)
      run_item(c, items[static_cast<size_t>(i)], s, a.q, cache, q_start, ctx_len, meta.block_table.as<const int32_t>(), a.out);
  });
}

}  // namespace brigade::cpu
