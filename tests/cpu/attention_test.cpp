// Paged attention against a naive double-precision reference that gathers each sequence's K and V
// into contiguous arrays through its block table. Pages are assigned at random (non-contiguous,
// shuffled), so a wrong page/slot computation shows up as a large error. Also tests write_kv.
//
// Tolerance: outputs are convex combinations of V entries in [-1, 1]; f32 softmax and dot
// products over head_dim <= 64 stay within 2e-5 of the double result (bf16/f16 caches are
// compared against the rounded values they store).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <xmmintrin.h>

#include "tests/cpu/cpu_test_util.h"

namespace brigade {
namespace {

using test::backend_at;
using test::get;
using test::make;

struct Seq {
  int n_q;
  int ctx;
};

struct Problem {
  QkvLayout l;
  int page_size;
  DType kv_dtype;
  int window;
  std::vector<Seq> seqs;
  float softcap = 0.0f;  // AttentionMeta::softcap
  std::vector<float> sinks;  // AttentionMeta::sinks, one per query head, or none
  int chunk = 0;             // AttentionMeta::chunk
  std::vector<float> alibi;  // AttentionMeta::alibi_slopes, one per query head, or none
};

struct Built {
  OwnedTensor qkv, k, v, q_start, ctx_len, table, sinks, alibi;
  AttentionMeta meta;
  std::vector<std::vector<int>> pages;  // per sequence, page of each block
};

Built build(Backend& b, const Problem& p, std::mt19937& rng) {
  Built o;
  int n_tokens = 0, max_blocks = 0, n_pages = 0;
  for (const Seq& s : p.seqs) {
    n_tokens += s.n_q;
    const int blocks = (s.ctx + p.page_size - 1) / p.page_size;
    max_blocks = std::max(max_blocks, blocks);
    n_pages += blocks;
  }
  n_pages += 3;  // spare pages nobody owns
  std::vector<int> perm(static_cast<size_t>(n_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const QkvLayout& l = p.l;
  o.qkv = make(b, DType::f32, {n_tokens, l.row_width()});
  o.k = make(b, p.kv_dtype, {n_pages, p.page_size, l.n_kv_heads, l.head_dim});
  o.v = make(b, p.kv_dtype, {n_pages, p.page_size, l.n_kv_heads, l.head_dim});
  o.q_start = make(b, DType::i32, {static_cast<int64_t>(p.seqs.size()) + 1});
  o.ctx_len = make(b, DType::i32, {static_cast<int64_t>(p.seqs.size())});
  o.table = make(b, DType::i32, {static_cast<int64_t>(p.seqs.size()), max_blocks});
  test::fill_uniform(o.qkv.tensor, rng);
  test::fill_uniform(o.k.tensor, rng);
  test::fill_uniform(o.v.tensor, rng);
  std::fill_n(o.table.tensor.as<int32_t>(), o.table.tensor.numel(), -1);
  size_t next = 0;
  int q0 = 0;
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    o.q_start.tensor.as<int32_t>()[s] = q0;
    o.ctx_len.tensor.as<int32_t>()[s] = p.seqs[s].ctx;
    q0 += p.seqs[s].n_q;
    std::vector<int> pages;
    for (int blk = 0; blk * p.page_size < p.seqs[s].ctx; ++blk) {
      pages.push_back(perm[next++]);
      o.table.tensor.as<int32_t>()[static_cast<int64_t>(s) * max_blocks + blk] = pages.back();
    }
    o.pages.push_back(pages);
  }
  o.q_start.tensor.as<int32_t>()[p.seqs.size()] = q0;
  o.meta.q_start = o.q_start.tensor;
  o.meta.ctx_len = o.ctx_len.tensor;
  o.meta.block_table = o.table.tensor;
  o.meta.n_seqs = static_cast<int>(p.seqs.size());
  o.meta.sliding_window = p.window;
  o.meta.softcap = p.softcap;
  o.meta.chunk = p.chunk;
  if (!p.sinks.empty()) {
    o.sinks = make(b, DType::f32, {static_cast<int64_t>(p.sinks.size())});
    std::copy(p.sinks.begin(), p.sinks.end(), o.sinks.tensor.as<float>());
    o.meta.sinks = o.sinks.tensor;
  }
  if (!p.alibi.empty()) {
    o.alibi = make(b, DType::f32, {static_cast<int64_t>(p.alibi.size())});
    std::copy(p.alibi.begin(), p.alibi.end(), o.alibi.tensor.as<float>());
    o.meta.alibi_slopes = o.alibi.tensor;
  }
  for (const Seq& s : p.seqs) {
    o.meta.max_q_len = std::max(o.meta.max_q_len, s.n_q);
    o.meta.max_ctx_len = std::max(o.meta.max_ctx_len, s.ctx);
  }
  return o;
}

// out [n_tokens, n_heads * head_dim] in double, from K/V gathered position by position.
std::vector<double> reference(const Problem& p, const Built& o, float scale) {
  const QkvLayout& l = p.l;
  const int64_t d = l.head_dim, group = l.n_heads / l.n_kv_heads;
  std::vector<double> out(static_cast<size_t>(o.qkv.tensor.dim(0) * l.q_width()), 0.0);
  int64_t row = 0;
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    const Seq& sq = p.seqs[s];
    auto kv_at = [&](const Tensor& t, int64_t pos, int64_t g, int64_t j) {
      const int64_t page = o.pages[s][static_cast<size_t>(pos / p.page_size)];
      return get(t, ((page * p.page_size + pos % p.page_size) * l.n_kv_heads + g) * d + j);
    };
    for (int j = 0; j < sq.n_q; ++j, ++row) {
      const int64_t pos = sq.ctx - sq.n_q + j;
      int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
      if (p.chunk > 0) lo = std::max(lo, pos - pos % p.chunk);  // Llama 4: its own chunk only
      for (int64_t h = 0; h < l.n_heads; ++h) {
        const int64_t g = h / group;
        std::vector<double> sc;
        for (int64_t t = lo; t <= pos; ++t) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += get(o.qkv.tensor, row * l.row_width() + h * d + e) * kv_at(o.k.tensor, t, g, e);
          dot *= scale;
          sc.push_back(p.softcap > 0 ? std::tanh(dot / p.softcap) * p.softcap : dot);
          if (!p.alibi.empty()) sc.back() += p.alibi[static_cast<size_t>(h)] * static_cast<double>(t - pos);  // ALiBi
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double sum = p.sinks.empty() ? 0.0 : std::exp(p.sinks[static_cast<size_t>(h)] - mx);  // gpt-oss's sink term
        for (double& v : sc) sum += (v = std::exp(v - mx));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t t = lo; t <= pos; ++t) acc += sc[static_cast<size_t>(t - lo)] * kv_at(o.v.tensor, t, g, e);
          out[static_cast<size_t>(row * l.q_width() + h * d + e)] = acc / sum;
        }
      }
    }
  }
  return out;
}

void check(const Problem& p, uint32_t seed) {
  std::mt19937 rng(seed);
  auto host = backend_at("scalar", 1);
  Built o = build(*host, p, rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.l.head_dim));
  const std::vector<double> ref = reference(p, o, scale);
  for (const std::string& level : test::simd_levels()) {
    for (int threads : {1, 2}) {
      auto b = backend_at(level, threads);
      auto out = make(*b, DType::f32, {o.qkv.tensor.dim(0), p.l.q_width()});
      b->attention(o.qkv.tensor, p.l, KvLayer{o.k.tensor, o.v.tensor}, o.meta, scale, out.tensor);
      b->synchronize();
      for (int64_t i = 0; i < out.tensor.numel(); ++i)
        ASSERT_NEAR(out.tensor.as<float>()[i], ref[static_cast<size_t>(i)], 2e-5)
            << level << " threads " << threads << " kv " << dtype_name(p.kv_dtype) << " index " << i;
    }
  }
}

// The largest difference between the references of `a` and `b` (a problem with and without one
// piece) over the same random inputs (`seed`, built as `a`).
double reference_gap(const Problem& a, const Problem& b, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  auto host = backend_at("scalar", 1);
  const Built o = build(*host, a, rng);
  const std::vector<double> x = reference(a, o, scale), y = reference(b, o, scale);
  double most = 0;
  for (size_t i = 0; i < x.size(); ++i) most = std::max(most, std::fabs(x[i] - y[i]));
  return most;
}

TEST(CpuAttention, DecodeBatch) {
  check({{4, 4, 32}, 16, DType::f32, 0, {{1, 1}, {1, 17}, {1, 40}, {1, 16}}}, 1);
}

TEST(CpuAttention, PrefillChunkWithCachedPrefix) {
  check({{4, 2, 32}, 8, DType::f32, 0, {{20, 50}}}, 2);  // rows 30..49 over a 30-token prefix
  check({{2, 2, 24}, 4, DType::f32, 0, {{37, 37}}}, 3);  // a whole prompt at once
}

TEST(CpuAttention, MixedBatchGqaAllKvDtypes) {
  for (DType kv : {DType::f32, DType::bf16, DType::f16})
    check({{8, 2, 64}, 16, kv, 0, {{1, 70}, {37, 37}, {5, 9}, {1, 1}, {19, 52}}}, 4);
}

// Kernels::attend_scores takes at most 64 queries per call: a group of 66 query heads over
// one kv head (as MLA's latent) is two calls per row; head_dim 24 is not a multiple of the lanes.
TEST(CpuAttention, LargeGroupsAndOddHeadDims) {
  check({{66, 1, 16}, 4, DType::f32, 0, {{3, 10}, {1, 6}}}, 14);
  check({{6, 2, 24}, 8, DType::bf16, 0, {{9, 20}, {5, 5}, {6, 30}}}, 15);
}

// Keys are scored in tiles of 64 positions gathered across pages: contexts of several tiles,
// pages smaller than a tile, not dividing it, and larger than it, prefill chunks whose rows start
// mid-tile next to decode rows, groups of 4 and 8 heads (whole 4-query blocks) and of 6 (a tail),
// head_dim 40 (a column tail).
TEST(CpuAttention, LongContextsAcrossTilesAndPages) {
  for (int page : {5, 16, 100})
    check({{8, 2, 64}, page, DType::bf16, 0, {{90, 200}, {1, 193}, {1, 64}, {65, 65}}}, 20 + page);
  check({{12, 2, 40}, 16, DType::f32, 0, {{70, 200}, {1, 129}}}, 23);
  check({{8, 1, 32}, 32, DType::f16, 90, {{100, 230}, {1, 260}}}, 24);  // a window across tiles
}

// Llama 4's chunked attention: a row sees only the positions of its own chunk, across tiles and
// pages (chunks of 48 and 100 over 64-position tiles, pages of 16), in a prefill whose rows
// straddle chunk boundaries, decode rows at a chunk's first position and deep inside one, and
// with a sliding window as well (the tighter bound wins, row by row).
TEST(CpuAttention, ChunkedAttentionSeesItsOwnChunkOnly) {
  for (int chunk : {48, 100}) {
    Problem p{{8, 2, 64}, 16, DType::bf16, 0, {{90, 200}, {1, 193}, {1, 101}, {1, 144}, {65, 65}}};
    p.chunk = chunk;
    check(p, 40 + chunk);
  }
  Problem both{{4, 2, 32}, 8, DType::f32, 20, {{70, 130}, {1, 97}}};
  both.chunk = 50;
  check(both, 41);
}

// A row's output depends on its position and the cache alone, bit for bit: a whole prompt
// attended at once, in two chunks, and row by row as decode steps give the same floats, as does
// the same cache laid out in pages of another size (the engine's chunked-equals-whole and
// batched-equals-alone guarantees rest on this).
TEST(CpuAttention, ARowsOutputDependsOnItsPositionAloneBitForBit) {
  constexpr int kN = 200;
  const QkvLayout l{8, 2, 64};
  for (int window : {0, 75}) {
    std::mt19937 rng(30 + window);
    auto host = backend_at("scalar", 1);
    Problem p{l, 16, DType::bf16, window, {{kN, kN}}};
    const Built o = build(*host, p, rng);
    // The same K/V rows in pages of 48 (in order), for the relaid run.
    constexpr int kPage2 = 48, kBlocks2 = (kN + kPage2 - 1) / kPage2;
    auto k2 = make(*host, DType::bf16, {kBlocks2, kPage2, l.n_kv_heads, l.head_dim});
    auto v2 = make(*host, DType::bf16, {kBlocks2, kPage2, l.n_kv_heads, l.head_dim});
    const int64_t row_bytes = l.kv_width() * 2;
    for (int pos = 0; pos < kN; ++pos) {
      const int64_t from = (static_cast<int64_t>(o.pages[0][static_cast<size_t>(pos / 16)]) * 16 + pos % 16) * row_bytes;
      std::memcpy(static_cast<char*>(k2.tensor.data) + pos * row_bytes, static_cast<const char*>(o.k.tensor.data) + from, static_cast<size_t>(row_bytes));
      std::memcpy(static_cast<char*>(v2.tensor.data) + pos * row_bytes, static_cast<const char*>(o.v.tensor.data) + from, static_cast<size_t>(row_bytes));
    }
    std::vector<int32_t> table2(kBlocks2);
    std::iota(table2.begin(), table2.end(), 0);
    for (const std::string& level : test::simd_levels()) {
      auto b = backend_at(level, 2);
      // Rows [r0, r1) of the prompt as one step over the first r1 positions.
      auto run = [&](int r0, int r1, const KvLayer& cache, const Tensor& table, float* dst) {
        std::vector<int32_t> q_start = {0, r1 - r0}, ctx = {r1};
        AttentionMeta meta = o.meta;
        meta.q_start = Tensor(q_start.data(), DType::i32, {2});
        meta.ctx_len = Tensor(ctx.data(), DType::i32, {1});
        meta.block_table = table;
        meta.max_q_len = r1 - r0;
        meta.max_ctx_len = r1;
        const Tensor q(o.qkv.tensor.as<float>() + static_cast<int64_t>(r0) * l.row_width(), DType::f32, {r1 - r0, l.row_width()});
        const Tensor out(dst + static_cast<int64_t>(r0) * l.q_width(), DType::f32, {r1 - r0, l.q_width()});
        b->attention(q, l, cache, meta, 0.125f, out);
        b->synchronize();
      };
      const KvLayer cache{o.k.tensor, o.v.tensor};
      const Tensor table2_t(table2.data(), DType::i32, {1, kBlocks2});
      std::vector<float> whole(static_cast<size_t>(kN * l.q_width())), chunks(whole.size()), steps(whole.size()),
          relaid(whole.size());
      run(0, kN, cache, o.table.tensor, whole.data());
      run(0, 77, cache, o.table.tensor, chunks.data());
      run(77, kN, cache, o.table.tensor, chunks.data());
      for (int r = 0; r < kN; ++r) run(r, r + 1, cache, o.table.tensor, steps.data());
      run(0, kN, KvLayer{k2.tensor, v2.tensor}, table2_t, relaid.data());
      for (size_t i = 0; i < whole.size(); ++i) {
        ASSERT_EQ(chunks[i], whole[i]) << level << " window " << window << " index " << i;
        ASSERT_EQ(steps[i], whole[i]) << level << " window " << window << " index " << i;
        ASSERT_EQ(relaid[i], whole[i]) << level << " window " << window << " index " << i;
      }
    }
  }
}

// Attention flushes denormals while its workers run (a peaked softmax's underflowed exps would
// otherwise cost a microcode assist per FMA) and gives the calling thread its MXCSR back.
TEST(CpuAttention, LeavesTheCallersFloatingPointModeAsItWas) {
  const unsigned before = _mm_getcsr();
  ASSERT_EQ(before & 0x8040u, 0u) << "the test runs with denormals on";
  check({{4, 2, 32}, 8, DType::f32, 0, {{20, 50}, {1, 9}}}, 16);
  EXPECT_EQ(_mm_getcsr() & ~0x3Fu, before & ~0x3Fu);  // the control bits; 0-5 are sticky exception flags
}

TEST(CpuAttention, SlidingWindow) {
  check({{6, 3, 20}, 4, DType::f32, 7, {{1, 30}, {12, 25}, {3, 3}}}, 5);
  check({{4, 1, 16}, 16, DType::bf16, 16, {{40, 70}, {1, 100}}}, 6);
}

// Gemma 2's attn_logit_softcapping: tanh(s / cap) * cap on every score before the softmax, with
// and without a window, prefill and decode rows; a cap this small changes the result far past
// the tolerance (checked against the uncapped reference).
TEST(CpuAttention, SoftcapBoundsTheScores) {
  Problem p{{4, 2, 32}, 8, DType::f32, 0, {{1, 30}, {20, 50}}, 0.3f};
  check(p, 12);
  p.window = 9;
  p.kv_dtype = DType::bf16;
  check(p, 13);
  Problem plain = p;
  plain.softcap = 0.0f;
  EXPECT_GT(reference_gap(p, plain, 12, 1.0f / std::sqrt(32.0f)), 1e-2);
}

// gpt-oss's attention sinks: one more exp(sink) in each head's denominator, with and without a
// window, prefill and decode rows, sinks below and above the scores (one far above, so the
// head's output nearly vanishes); leaving them out moves the result past the tolerance.
TEST(CpuAttention, SinksJoinTheDenominator) {
  Problem p{{8, 2, 16}, 8, DType::f32, 0, {{1, 30}, {20, 50}, {3, 3}}};
  p.sinks = {-2.0f, -0.5f, 0.0f, 0.3f, 1.0f, 2.5f, 6.0f, 40.0f};
  check(p, 14);
  p.window = 9;
  p.kv_dtype = DType::bf16;
  check(p, 15);
  Problem without = p;
  without.sinks.clear();
  EXPECT_GT(reference_gap(p, without, 14, 0.25f), 1e-2);
}

// ALiBi (BLOOM, MPT): each head's scores gain slope * (key position - query position); decode and
// prefill rows over cached prefixes, contexts across several 64-key tiles and pages that do not
// divide them, GQA groups of 4 and of 6 (a 4-query block and a tail), a window, bf16 K/V, steep
// slopes (1: the nearest keys dominate) and gentle ones. Leaving the slopes out moves the result
// past the tolerance.
TEST(CpuAttention, AlibiBiasesScoresByDistance) {
  Problem p{{8, 2, 32}, 5, DType::f32, 0, {{1, 30}, {70, 150}, {3, 3}, {1, 129}}};
  p.alibi = {1.0f, 0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f};
  check(p, 16);
  p.window = 40;
  p.kv_dtype = DType::bf16;
  check(p, 17);
  Problem g{{12, 2, 24}, 16, DType::f32, 0, {{65, 65}, {1, 200}}};  // groups of 6
  for (int h = 0; h < 12; ++h) g.alibi.push_back(std::pow(2.0f, -0.75f * static_cast<float>(h + 1)));
  check(g, 18);
  Problem without = p;
  without.alibi.clear();
  EXPECT_GT(reference_gap(p, without, 16, 1.0f / std::sqrt(32.0f)), 1e-2);
}

TEST(CpuAttention, WriteKvThenAttend) {
  // write_kv puts row i at slot slots[i] (negative = skip) in the cache's dtype.
  for (DType kv : {DType::f32, DType::bf16, DType::f16}) {
    std::mt19937 rng(11);
    auto b = backend_at(test::simd_levels().back(), 2);
    const QkvLayout l{4, 2, 8};
    auto qkv = make(*b, DType::f32, {5, l.row_width()});
    test::fill_uniform(qkv.tensor, rng);
    auto k = make(*b, kv, {3, 4, 2, 8});
    auto v = make(*b, kv, {3, 4, 2, 8});
    std::fill_n(static_cast<char*>(k.tensor.data), k.tensor.nbytes(), 0);
    std::fill_n(static_cast<char*>(v.tensor.data), v.tensor.nbytes(), 0);
    auto slots = make(*b, DType::i32, {5});
    const int32_t slot_values[5] = {9, -1, 0, 11, 4};
    std::copy_n(slot_values, 5, slots.tensor.as<int32_t>());
    b->write_kv(KvLayer{k.tensor, v.tensor}, qkv.tensor, l, slots.tensor);
    const double tol = kv == DType::f32 ? 0 : (kv == DType::bf16 ? 4e-3 : 5e-4);
    std::vector<bool> written(12, false);
    for (int i = 0; i < 5; ++i) {
      if (slot_values[i] < 0) continue;
      written[static_cast<size_t>(slot_values[i])] = true;
      for (int e = 0; e < l.kv_width(); ++e) {
        const int64_t dst = static_cast<int64_t>(slot_values[i]) * l.kv_width() + e;
        EXPECT_NEAR(get(k.tensor, dst), get(qkv.tensor, i * l.row_width() + l.q_width() + e), tol);
        EXPECT_NEAR(get(v.tensor, dst), get(qkv.tensor, i * l.row_width() + l.q_width() + l.kv_width() + e), tol);
      }
    }
    for (int s = 0; s < 12; ++s) {
      if (written[static_cast<size_t>(s)]) continue;
      for (int e = 0; e < l.kv_width(); ++e) EXPECT_EQ(get(k.tensor, s * l.kv_width() + e), 0.0);
    }
  }
}

}  // namespace
}  // namespace brigade
