// Paged attention for a batch of sequences, each a prefill chunk over a cached prefix or a
// single decode token (AttentionMeta in core/backend.h).
//
// Work item = (sequence, kv head, block of up to kQBlock query rows). An item walks the KV pages
// its rows can see once, page by page (a page is the tile): K and V of the page are widened to f32
// once, K transposed, and used by all rows x the query heads sharing that kv head (GQA): a row's
// heads score the keys together, kLanes keys per vector (Kernels::attend_tile). Each query keeps
// an online softmax (running max m, sum l, unnormalised output acc), so no [n_q, ctx] matrix exists.
//
// The cache dtype is resolved once per call into a run_item instantiation (KvRead): f32 pages are
// read in place, bf16/f16 pages are widened per tile, int8 pages are dequantized per tile with
// each row's own scale (cpu/kv_int8.h). No per-element dtype branch runs in the loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <xmmintrin.h>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

constexpr int kQBlock = 16;

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
  float scale;
  float softcap;  // AttentionMeta::softcap
  const float* sinks;  // [n_kv * group] AttentionMeta::sinks, or null
};

// KV positions a query row at some position may attend to (causal, sliding window).
struct QueryRange {
  int64_t lo, hi;  // visible KV positions [lo, hi], inclusive
};

QueryRange visible(int64_t pos, int window) {
  return {window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0, pos};
}

// Address of the K or V vector [head_dim] of (page, slot, kv head), any cache dtype.
const void* kv_row(const Tensor& t, const Shape& s, int64_t page, int64_t slot, int64_t head) {
  const int64_t idx = ((page * s.page_size + slot) * s.n_kv + head) * s.head_dim;
  return static_cast<const char*>(t.data) + static_cast<size_t>(idx) * dtype_size(t.dtype);
}

// Pulls one kv head's K and V rows of `page` toward L1 while the current page is scored: the
// rows are head_dim elements at a stride of n_kv_heads * head_dim, a pattern the hardware
// prefetcher does not follow across pages (profiling showed half the time stalled there).
void prefetch_page(const KvLayer& cache, const Shape& s, int64_t page, int64_t head) {
  const int64_t row_bytes = s.head_dim * static_cast<int64_t>(dtype_size(cache.k.dtype));
  for (int64_t slot = 0; slot < s.page_size; ++slot) {
    const char* k = static_cast<const char*>(kv_row(cache.k, s, page, slot, head));
    const char* v = static_cast<const char*>(kv_row(cache.v, s, page, slot, head));
    for (int64_t off = 0; off < row_bytes; off += 64) {
      __builtin_prefetch(k + off);
      __builtin_prefetch(v + off);
    }
  }
}

// How run_item reads a tile of K/V rows, chosen once per call from the cache dtype.
enum class KvRead { f32_in_place, widen, dequantize_i8 };

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
  std::vector<float> q, acc, m, l, k_tile, v_tile, scores, kt;
};

template <KvRead kRead>
void run_item(const CpuContext& c, const Item& it, const Shape& s, const float* qkv,
              const KvLayer& cache, const int32_t* q_start, const int32_t* ctx_len,
              const int32_t* block_table, float* out) {
  thread_local Scratch sc;
  const Kernels& kn = *c.kernels;
  const int64_t d = s.head_dim;
  const int64_t n_q = q_start[it.seq + 1] - q_start[it.seq];
  const int64_t first_pos = ctx_len[it.seq] - n_q;
  const int64_t n_rows = it.row_end - it.row_begin;
  const int64_t nq = n_rows * s.group;  // queries in this item: row-major over (row, head)
  sc.q.resize(static_cast<size_t>(nq * d));
  sc.acc.assign(static_cast<size_t>(nq * d), 0.0f);
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
  const QueryRange first = visible(first_pos + it.row_begin, s.sliding_window);
  const QueryRange last = visible(first_pos + it.row_end - 1, s.sliding_window);
  if constexpr (kRead != KvRead::f32_in_place) {
    sc.k_tile.resize(static_cast<size_t>(s.page_size * d));
    sc.v_tile.resize(static_cast<size_t>(s.page_size * d));
  }
  // The tile's keys transposed ([d][ldk], Kernels::transpose_keys), plus the 16 floats
  // attend_tile's last loads may read past a row's end. Zeroed when (re)sized so that every float
  // it can read is finite; later tiles leave their (finite) keys behind in columns a shorter tile
  // does not write. Every row, decode or prefill, takes this one path, so a row's output does not
  // depend on how its sequence was split into steps (KvInt8Model.PagesAndLogitsDoNotDependOn...).
  const int64_t ldk = (s.page_size + 15) / 16 * 16;
  const size_t kt_size = static_cast<size_t>(d * ldk + 16);
  if (sc.kt.size() != kt_size) sc.kt.assign(kt_size, 0.0f);
  sc.scores.resize(static_cast<size_t>(std::min(s.group, kAttendTileMaxQueries) * ldk));
  const int32_t* table = block_table + it.seq * s.max_blocks;
  for (int64_t b = first.lo / s.page_size; b <= last.hi / s.page_size; ++b) {
    const int64_t page = table[b];
    const int64_t p0 = std::max(first.lo, b * s.page_size);
    const int64_t p1 = std::min(last.hi + 1, (b + 1) * s.page_size);  // tile positions [p0, p1)
    const int64_t o0 = p0 - b * s.page_size;
    if (b + 1 <= last.hi / s.page_size) prefetch_page(cache, s, table[b + 1], it.kv_head);
    // Rows of this tile's K and V for our kv head, as f32, stride `kv_stride`.
    const float* k_base;
    const float* v_base;
    int64_t kv_stride;
    if constexpr (kRead == KvRead::f32_in_place) {
      k_base = static_cast<const float*>(kv_row(cache.k, s, page, o0, it.kv_head));
      v_base = static_cast<const float*>(kv_row(cache.v, s, page, o0, it.kv_head));
      kv_stride = s.n_kv * d;
    } else if constexpr (kRead == KvRead::widen) {
      for (int64_t t = 0; t < p1 - p0; ++t) {
        kn.to_f32(kv_row(cache.k, s, page, o0 + t, it.kv_head), cache.k.dtype, sc.k_tile.data() + t * d, d);
        kn.to_f32(kv_row(cache.v, s, page, o0 + t, it.kv_head), cache.v.dtype, sc.v_tile.data() + t * d, d);
      }
      k_base = sc.k_tile.data();
      v_base = sc.v_tile.data();
      kv_stride = d;
    } else {
      // Row scales of (page, offset, kv head) at [(page * page_size + offset) * n_kv + kv head].
      const float* ks = cache.k_scale.as<const float>() + (page * s.page_size + o0) * s.n_kv + it.kv_head;
      const float* vs = cache.v_scale.as<const float>() + (page * s.page_size + o0) * s.n_kv + it.kv_head;
      for (int64_t t = 0; t < p1 - p0; ++t) {
        kn.dequantize_i8(static_cast<const int8_t*>(kv_row(cache.k, s, page, o0 + t, it.kv_head)), ks[t * s.n_kv],
                         sc.k_tile.data() + t * d, d);
        kn.dequantize_i8(static_cast<const int8_t*>(kv_row(cache.v, s, page, o0 + t, it.kv_head)), vs[t * s.n_kv],
                         sc.v_tile.data() + t * d, d);
      }
      k_base = sc.k_tile.data();
      v_base = sc.v_tile.data();
      kv_stride = d;
    }
    kn.transpose_keys(k_base, kv_stride, p1 - p0, d, sc.kt.data(), ldk);
    for (int64_t r = 0; r < n_rows; ++r) {
      const QueryRange qr = visible(first_pos + it.row_begin + r, s.sliding_window);
      const int64_t a = std::max(p0, qr.lo), e = std::min(p1, qr.hi + 1);
      if (a >= e) continue;
      for (int64_t h0 = 0; h0 < s.group; h0 += kAttendTileMaxQueries) {  // the row's heads, 64 at most per call
        const int64_t q0 = r * s.group + h0;
        kn.attend_tile(sc.q.data() + q0 * d, std::min(s.group - h0, kAttendTileMaxQueries), sc.kt.data() + (a - p0), ldk,
                       v_base + (a - p0) * kv_stride, kv_stride, e - a, d, &sc.m[static_cast<size_t>(q0)],
                       &sc.l[static_cast<size_t>(q0)], sc.acc.data() + q0 * d, sc.scores.data(), s.softcap);
      }
    }
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    float* dst_row = out + (q_start[it.seq] + it.row_begin + r) * s.out_width;
    for (int64_t h = 0; h < s.group; ++h) {
      const int64_t qi = r * s.group + h;
      // A sink adds exp(sink) to the denominator: with the running max m, l + exp(sink - m).
      const float sink = s.sinks != nullptr ? std::exp(s.sinks[it.kv_head * s.group + h] - sc.m[static_cast<size_t>(qi)]) : 0.0f;
      const float inv = 1.0f / (sc.l[static_cast<size_t>(qi)] + sink);
      const float* acc = sc.acc.data() + qi * d;
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
  s.scale = a.scale;
  s.softcap = meta.softcap;
  s.sinks = a.sinks;
  std::vector<Item> items;
  for (int seq = 0; seq < meta.n_seqs; ++seq) {
    const int n_q = q_start[seq + 1] - q_start[seq];
    BRIGADE_CHECK(n_q <= ctx_len[seq], "a sequence's query rows are the tail of its context");
    for (int g = 0; g < a.n_kv; ++g)
      for (int r = 0; r < n_q; r += kQBlock) items.push_back({seq, g, r, std::min(n_q, r + kQBlock)});
  }
  auto run_all = [&](auto read) {
    c.pool->parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t b, int64_t e, int) {
      const FlushDenormals ftz;
      for (int64_t i = b; i < e; ++i)
        run_item<decltype(read)::value>(c, items[static_cast<size_t>(i)], s, a.q, cache, q_start, ctx_len,
                                        meta.block_table.as<const int32_t>(), a.out);
    });
  };
  switch (cache.k.dtype) {
    case DType::f32: run_all(std::integral_constant<KvRead, KvRead::f32_in_place>{}); break;
    case DType::bf16: case DType::f16: run_all(std::integral_constant<KvRead, KvRead::widen>{}); break;
    case DType::i8: run_all(std::integral_constant<KvRead, KvRead::dequantize_i8>{}); break;
    default: BRIGADE_CHECK(false, "KV cache dtype is f32, bf16, f16 or i8");
  }
}

}  // namespace brigade::cpu
