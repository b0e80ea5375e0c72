// int8 KV (cpu/kv_int8.h): the quantization scheme's bounds, write_kv into int8 pages (chunked
// writes store the same bytes as one write), and paged attention over int8 pages against the
// same attention over the dequantized values (exact up to f32 rounding) and over the original
// f32 values (the quantization error, bounded below).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cpu/kv_int8.h"
#include "tests/cpu/cpu_test_util.h"

namespace brigade {
namespace {

using cpu::kv_int8_dequantize;
using cpu::kv_int8_quantize;
using cpu::kv_int8_scale;
using test::backend_at;
using test::make;

TEST(KvInt8, ScaleMapsTheRowAbsmaxTo127) {
  for (float a : {1e-30f, 0.001f, 0.5f, 1.0f, 1.5f, 63.9f, 127.0f, 3e5f}) {
    const float s = kv_int8_scale(a);
    EXPECT_EQ(s, a / 127.0f) << a;
    std::vector<float> x = {a, -a, 0.0f};
    std::vector<int8_t> q(3);
    kv_int8_quantize(x.data(), s, q.data(), 3);
    EXPECT_EQ(q, (std::vector<int8_t>{127, -127, 0})) << a;  // the extremes use the full range
  }
  EXPECT_EQ(kv_int8_scale(0.0f), 0.0f);
  EXPECT_EQ(kv_int8_scale(std::nanf("")), 0.0f);
  EXPECT_TRUE(std::isfinite(kv_int8_scale(INFINITY)));
}

TEST(KvInt8, QuantizeSaturatesAndStoresZeroForNaNAndEmptyRows) {
  const float s = kv_int8_scale(1.0f);
  std::vector<float> x = {INFINITY, -INFINITY, std::nanf(""), 1e30f, -1e30f, 0.5f};
  std::vector<int8_t> q(x.size());
  kv_int8_quantize(x.data(), s, q.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(q, (std::vector<int8_t>{127, -127, 0, 127, -127, 64}));  // 0.5 * 127 = 63.5 -> 64 (even)
  std::vector<float> zeros(5, 0.0f);
  kv_int8_quantize(zeros.data(), kv_int8_scale(0.0f), q.data(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q[static_cast<size_t>(i)], 0);
}

TEST(KvInt8, RoundTripErrorIsAtMostHalfAStep) {
  std::mt19937 rng(3);
  for (float range : {1e-3f, 0.7f, 1.0f, 40.0f}) {
    std::uniform_real_distribution<float> dist(-range, range);
    std::vector<float> x(1000);
    for (float& v : x) v = dist(rng);
    x[17] = range;  // the extremes are representable
    x[18] = -range;
    const float s = kv_int8_scale(cpu::kv_int8_absmax(x.data(), 1000));
    std::vector<int8_t> q(1000);
    kv_int8_quantize(x.data(), s, q.data(), 1000);
    double sum_err = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double err = std::fabs(kv_int8_dequantize(q[i], s) - x[i]);
      // Half a step, plus the f32 rounding of x / s and q * s.
      ASSERT_LE(err, 0.5 * s * (1 + 1e-5)) << "range " << range << " index " << i;
      ASSERT_LE(err, range / 254.0 * (1 + 1e-5)) << "range " << range << " index " << i;
      sum_err += err;
    }
    // Uniform data: round to nearest errs by a quarter step on average.
    EXPECT_NEAR(sum_err / 1000.0, 0.25 * s, 0.03 * s) << range;
  }
}

// Attention reads int8 rows where they are: the key transposer and the PV kernel each dequantize
// a row as kv_int8_dequantize does, at every level, over head_dim 37 (two whole vectors and a
// tail on AVX2, one and a tail on AVX-512) and rows of two runs with their own scales.
TEST(KvInt8, KernelsReadRowsAsTheScalarFormulaAtEveryLevel) {
  constexpr int64_t kD = 37, kRows = 3, kStride = 2 * kD;  // rows of one kv head among two
  std::vector<int8_t> q(static_cast<size_t>(kRows * kStride));
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 256) - 128);
  q[5] = 127;
  const std::vector<float> scales = {0.125f, -1.0f, 0.0173f, 2.5f, 0.3f, 7.0f};  // [row][head]
  const cpu::KvRun runs[2] = {{q.data(), scales.data(), 2}, {q.data() + 2 * kStride, scales.data() + 4, 1}};
  cpu::KvRows rows;
  rows.dtype = DType::i8;
  rows.stride = kStride;
  rows.scale_stride = 2;
  rows.runs = runs;
  rows.n_runs = 2;
  auto expected = [&](int64_t t, int64_t j) {
    return kv_int8_dequantize(q[static_cast<size_t>(t * kStride + j)], scales[static_cast<size_t>(t * 2)]);
  };
  for (size_t li = 0; li < test::simd_levels().size(); ++li) {
    const std::string& level = test::simd_levels()[li];
    const cpu::Kernels& kn = cpu::kernels_for(static_cast<cpu::SimdLevel>(li));
    constexpr int64_t kLdk = 32;
    std::vector<float> kt(static_cast<size_t>(kD * kLdk + 16), -1.0f);
    kn.transpose_keys(rows, kD, kt.data(), kLdk);
    for (int64_t t = 0; t < kRows; ++t)
      for (int64_t j = 0; j < kD; ++j) EXPECT_EQ(kt[static_cast<size_t>(j * kLdk + t)], expected(t, j)) << level;
    // One query per row, weight 1 on it and 0 on the others: the output is the row.
    for (int64_t t = 0; t < kRows; ++t) {
      std::vector<float> p(kRows, 0.0f), acc(kD, 0.0f);
      p[static_cast<size_t>(t)] = 1.0f;
      kn.attend_values(p.data(), kRows, 1, rows, kD, nullptr, acc.data());
      for (int64_t j = 0; j < kD; ++j) EXPECT_EQ(acc[static_cast<size_t>(j)], expected(t, j)) << level << " row " << t;
    }
  }
}

// ---- write_kv and attention over int8 pages ----

constexpr int kPageSize = 8;
const QkvLayout kLayout{8, 2, 64};  // GQA group 4

struct Int8Cache {
  OwnedTensor k, v, k_scale, v_scale;
  KvLayer layer() const { return {k.tensor, v.tensor, k_scale.tensor, v_scale.tensor}; }
};

Int8Cache make_int8_cache(Backend& b, int n_pages, uint8_t garbage) {
  Int8Cache c;
  c.k = make(b, DType::i8, {n_pages, kPageSize, kLayout.n_kv_heads, kLayout.head_dim});
  c.v = make(b, DType::i8, {n_pages, kPageSize, kLayout.n_kv_heads, kLayout.head_dim});
  c.k_scale = make(b, DType::f32, {n_pages, kPageSize, kLayout.n_kv_heads});
  c.v_scale = make(b, DType::f32, {n_pages, kPageSize, kLayout.n_kv_heads});
  // A previous owner's bytes and (large) scales: a write must replace them.
  std::fill_n(static_cast<uint8_t*>(c.k.tensor.data), c.k.tensor.nbytes(), garbage);
  std::fill_n(static_cast<uint8_t*>(c.v.tensor.data), c.v.tensor.nbytes(), garbage);
  std::fill_n(c.k_scale.tensor.as<float>(), c.k_scale.tensor.numel(), 1024.0f);
  std::fill_n(c.v_scale.tensor.as<float>(), c.v_scale.tensor.numel(), 1024.0f);
  return c;
}

// qkv rows [n, row_width] whose K/V magnitudes grow along the sequence (x0.05 .. x3) and differ
// per head (under a per-page scale, later tokens would keep raising their page's scale).
OwnedTensor growing_rows(Backend& b, int n, std::mt19937& rng) {
  auto qkv = make(b, DType::f32, {n, kLayout.row_width()});
  test::fill_uniform(qkv.tensor, rng);
  for (int i = 0; i < n; ++i)
    for (int j = kLayout.q_width(); j < kLayout.row_width(); ++j)
      qkv.tensor.as<float>()[i * kLayout.row_width() + j] *= 0.05f + 3.0f * static_cast<float>((i * 7919 + j) % 97) / 97.0f *
                                                                          static_cast<float>(i + 1) / static_cast<float>(n);
  return qkv;
}

// Writes rows [first, first + n) of `qkv` for a sequence at positions [first, first + n) into
// the pages `pages` (block table), as one write_kv call.
void write_span(Backend& b, const Int8Cache& c, const Tensor& qkv, const std::vector<int>& pages, int first, int n) {
  auto slots = make(b, DType::i32, {n});
  auto rows = make(b, DType::f32, {n, kLayout.row_width()});
  for (int i = 0; i < n; ++i) {
    const int pos = first + i;
    slots.tensor.as<int32_t>()[i] = pages[static_cast<size_t>(pos / kPageSize)] * kPageSize + pos % kPageSize;
    std::copy_n(qkv.as<const float>() + static_cast<int64_t>(pos) * kLayout.row_width(), kLayout.row_width(),
                rows.tensor.as<float>() + static_cast<int64_t>(i) * kLayout.row_width());
  }
  b.write_kv(c.layer(), rows.tensor, kLayout, slots.tensor);
}

// The bytes and the row scales of the first n_tokens positions of a sequence.
std::vector<float> page_contents(const Int8Cache& c, const std::vector<int>& pages, int n_tokens) {
  std::vector<float> out;
  const int64_t w = kLayout.kv_width();
  for (int pos = 0; pos < n_tokens; ++pos) {
    const int64_t slot = static_cast<int64_t>(pages[static_cast<size_t>(pos / kPageSize)]) * kPageSize + pos % kPageSize;
    for (const Tensor* t : {&c.k.tensor, &c.v.tensor})
      for (int64_t e = 0; e < w; ++e) out.push_back(t->as<const int8_t>()[slot * w + e]);
    for (const Tensor* t : {&c.k_scale.tensor, &c.v_scale.tensor})
      for (int h = 0; h < kLayout.n_kv_heads; ++h) out.push_back(t->as<const float>()[slot * kLayout.n_kv_heads + h]);
  }
  return out;
}

TEST(KvInt8, ChunkedPrefillAndDecodeStoreTheSamePagesAsOnePrefill) {
  constexpr int kTokens = 45;  // 5 full pages and a partial one
  const std::vector<int> pages = {5, 0, 3, 6, 1, 4};
  std::mt19937 rng(5);
  auto host = backend_at("scalar", 1);
  auto qkv = growing_rows(*host, kTokens, rng);
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level, 2);
    const Int8Cache once = make_int8_cache(*b, 7, 0x55);
    write_span(*b, once, qkv.tensor, pages, 0, kTokens);
    const std::vector<float> want = page_contents(once, pages, kTokens);
    // Every row's scale is the one its own values ask for (the previous owner's scale is gone),
    // and every stored value is within half a step of its original.
    for (int pos = 0; pos < kTokens; ++pos) {
      const int64_t slot = static_cast<int64_t>(pages[static_cast<size_t>(pos / kPageSize)]) * kPageSize + pos % kPageSize;
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < kLayout.n_kv_heads; ++h) {
          const float* x = qkv.tensor.as<const float>() + pos * kLayout.row_width() + kLayout.q_width() +
                           kv * kLayout.kv_width() + h * kLayout.head_dim;
          const float s = (kv ? once.v_scale : once.k_scale).tensor.as<const float>()[slot * kLayout.n_kv_heads + h];
          ASSERT_EQ(s, kv_int8_scale(cpu::kv_int8_absmax(x, kLayout.head_dim)))
              << level << " pos " << pos << " kv " << kv << " head " << h;
          const int8_t* q = (kv ? once.v : once.k).tensor.as<const int8_t>() + (slot * kLayout.n_kv_heads + h) * kLayout.head_dim;
          for (int j = 0; j < kLayout.head_dim; ++j)
            ASSERT_LE(std::fabs(kv_int8_dequantize(q[j], s) - x[j]), 0.5f * s * (1 + 1e-5f)) << level << " pos " << pos;
        }
    }
    for (const std::vector<int>& chunks : {std::vector<int>{7, 7, 7, 7, 7, 7, 3}, std::vector<int>(kTokens, 1),
                                           std::vector<int>{13, 1, 1, 1, 29}, std::vector<int>{8, 16, 21}}) {
      const Int8Cache split = make_int8_cache(*b, 7, 0x81);
      int pos = 0;
      for (int n : chunks) {
        write_span(*b, split, qkv.tensor, pages, pos, n);
        pos += n;
      }
      ASSERT_EQ(pos, kTokens);
      EXPECT_EQ(page_contents(split, pages, kTokens), want) << level << ", " << chunks.size() << " chunks";
    }
  }
}

// Fills `c` through write_kv with the f32 K/V in k32/v32 [n_pages, page_size, n_kv, d] (every slot).
void quantize_cache(Backend& b, const Int8Cache& c, const Tensor& k32, const Tensor& v32) {
  const int64_t n_slots = k32.dim(0) * kPageSize, w = kLayout.kv_width();
  auto rows = make(b, DType::f32, {n_slots, kLayout.row_width()});
  auto slots = make(b, DType::i32, {n_slots});
  for (int64_t s = 0; s < n_slots; ++s) {
    slots.tensor.as<int32_t>()[s] = static_cast<int32_t>(s);
    float* row = rows.tensor.as<float>() + s * kLayout.row_width();
    std::copy_n(k32.as<const float>() + s * w, w, row + kLayout.q_width());
    std::copy_n(v32.as<const float>() + s * w, w, row + kLayout.q_width() + w);
  }
  b.write_kv(c.layer(), rows.tensor, kLayout, slots.tensor);
}

struct Seq {
  int n_q, ctx;
};

TEST(KvInt8, AttentionOverInt8PagesMatchesDequantizedAndOriginalF32) {
  // A decode batch, a prefill chunk over a cached prefix, and a whole prompt; then the same with
  // a sliding window.
  const std::vector<Seq> seqs = {{1, 70}, {1, 9}, {19, 52}, {37, 37}, {1, 1}};
  std::mt19937 rng(6);
  auto host = backend_at("scalar", 1);
  int n_tokens = 0, max_blocks = 0, n_pages = 0;
  for (const Seq& s : seqs) {
    n_tokens += s.n_q;
    max_blocks = std::max(max_blocks, (s.ctx + kPageSize - 1) / kPageSize);
    n_pages += (s.ctx + kPageSize - 1) / kPageSize;
  }
  auto k32 = make(*host, DType::f32, {n_pages, kPageSize, kLayout.n_kv_heads, kLayout.head_dim});
  auto v32 = make(*host, DType::f32, {n_pages, kPageSize, kLayout.n_kv_heads, kLayout.head_dim});
  test::fill_uniform(k32.tensor, rng, -2.0f, 2.0f);
  test::fill_uniform(v32.tensor, rng);
  const Int8Cache c8 = make_int8_cache(*host, n_pages, 0);
  quantize_cache(*host, c8, k32.tensor, v32.tensor);
  // The values the int8 pages stand for, as an f32 cache.
  auto kdq = make(*host, DType::f32, {n_pages, kPageSize, kLayout.n_kv_heads, kLayout.head_dim});
  auto vdq = make(*host, DType::f32, {n_pages, kPageSize, kLayout.n_kv_heads, kLayout.head_dim});
  for (int64_t i = 0; i < kdq.tensor.numel(); ++i) {
    const int64_t scale_index = i / kLayout.head_dim;  // scales [n_pages, page_size, n_kv], one per row
    kdq.tensor.as<float>()[i] = kv_int8_dequantize(c8.k.tensor.as<int8_t>()[i], c8.k_scale.tensor.as<float>()[scale_index]);
    vdq.tensor.as<float>()[i] = kv_int8_dequantize(c8.v.tensor.as<int8_t>()[i], c8.v_scale.tensor.as<float>()[scale_index]);
  }
  auto qkv = make(*host, DType::f32, {n_tokens, kLayout.row_width()});
  test::fill_uniform(qkv.tensor, rng);
  auto q_start = make(*host, DType::i32, {static_cast<int64_t>(seqs.size()) + 1});
  auto ctx_len = make(*host, DType::i32, {static_cast<int64_t>(seqs.size())});
  auto table = make(*host, DType::i32, {static_cast<int64_t>(seqs.size()), max_blocks});
  std::vector<int> perm(static_cast<size_t>(n_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::fill_n(table.tensor.as<int32_t>(), table.tensor.numel(), -1);
  size_t next = 0;
  AttentionMeta meta;
  q_start.tensor.as<int32_t>()[0] = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    q_start.tensor.as<int32_t>()[s + 1] = q_start.tensor.as<int32_t>()[s] + seqs[s].n_q;
    ctx_len.tensor.as<int32_t>()[s] = seqs[s].ctx;
    for (int blk = 0; blk * kPageSize < seqs[s].ctx; ++blk)
      table.tensor.as<int32_t>()[static_cast<int64_t>(s) * max_blocks + blk] = perm[next++];
    meta.max_q_len = std::max(meta.max_q_len, seqs[s].n_q);
    meta.max_ctx_len = std::max(meta.max_ctx_len, seqs[s].ctx);
  }
  meta.q_start = q_start.tensor;
  meta.ctx_len = ctx_len.tensor;
  meta.block_table = table.tensor;
  meta.n_seqs = static_cast<int>(seqs.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(kLayout.head_dim));
  for (int window : {0, 11}) {
    meta.sliding_window = window;
    auto ref32 = make(*host, DType::f32, {n_tokens, kLayout.q_width()});
    auto refdq = make(*host, DType::f32, {n_tokens, kLayout.q_width()});
    host->attention(qkv.tensor, kLayout, KvLayer{k32.tensor, v32.tensor}, meta, scale, ref32.tensor);
    host->attention(qkv.tensor, kLayout, KvLayer{kdq.tensor, vdq.tensor}, meta, scale, refdq.tensor);
    for (const std::string& level : test::simd_levels()) {
      for (int threads : {1, 2}) {
        auto b = backend_at(level, threads);
        auto out = make(*b, DType::f32, {n_tokens, kLayout.q_width()});
        b->attention(qkv.tensor, kLayout, c8.layer(), meta, scale, out.tensor);
        double max_err = 0, sum_err = 0;
        for (int64_t i = 0; i < out.tensor.numel(); ++i) {
          const float o = out.tensor.as<float>()[i];
          // Same values as the dequantized f32 cache: only the summation order may differ.
          ASSERT_NEAR(o, refdq.tensor.as<float>()[i], 2e-5) << level << " window " << window << " index " << i;
          const double err = std::fabs(o - ref32.tensor.as<float>()[i]);
          max_err = std::max(max_err, err);
          sum_err += err;
        }
        // Against the unquantized cache: V in [-1, 1] has steps of ~1/127 (error <= 1/254 per
        // value, averaging out over a convex combination), K in [-2, 2] perturbs each score by
        // at most sum|q| * 2/254 * scale. Measured here: max 6.7e-3, mean 6.1e-4 (8.2e-4 with the window).
        EXPECT_LT(max_err, 1e-2) << level << " window " << window;
        EXPECT_LT(sum_err / static_cast<double>(out.tensor.numel()), 1.5e-3) << level << " window " << window;
        if (level == "scalar" && threads == 1)
          std::printf("int8 KV attention vs f32 (window %d): max |d| %.2e, mean |d| %.2e\n", window, max_err,
                      sum_err / static_cast<double>(out.tensor.numel()));
      }
    }
  }
}

}  // namespace
}  // namespace brigade
