// Each GPU op against the CPU backend on fresh random inputs (gpu_test_util.h for the method).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "kvstore/kv_layout.h"
#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

struct MatmulCase {
  int64_t n, k, m;
  bool bias;
  DType out;
};

TEST(GpuOps, MatmulMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(1);
  for (const MatmulCase c : {MatmulCase{1, 256, 384, false, DType::bf16}, MatmulCase{7, 512, 200, true, DType::bf16},
                             MatmulCase{64, 256, 1000, false, DType::f32}, MatmulCase{300, 128, 256, true, DType::f32}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " k=" << c.k << " m=" << c.m << " bias=" << c.bias);
    const auto x = random_values(rng, c.n * c.k), w = random_values(rng, c.m * c.k), bias = random_values(rng, c.m);
    const auto wc = weight(cpu(), c.m, c.k, w), wg = weight(*gpu(), c.m, c.k, w);
    const auto xc = put(cpu(), DType::f32, {c.n, c.k}, x), xg = put(*gpu(), DType::bf16, {c.n, c.k}, x);
    const auto bc = put(cpu(), DType::f32, {c.m}, bias), bg = put(*gpu(), DType::f32, {c.m}, bias);
    const auto oc = empty(cpu(), DType::f32, {c.n, c.m}), og = empty(*gpu(), c.out, {c.n, c.m});
    cpu().matmul(xc.tensor, wc.tensor, c.bias ? bc.tensor : Tensor(), oc.tensor);
    gpu()->matmul(xg.tensor, wg.tensor, c.bias ? bg.tensor : Tensor(), og.tensor);
    EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), c.out == DType::f32 ? 2e-3 : kBf16Tol);
  }
}

TEST(GpuOps, EmbeddingAndGatherRows) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(2);
  const int64_t vocab = 300, d = 96, n = 17;
  const auto table = random_values(rng, vocab * d);
  std::vector<int32_t> ids(n);
  for (auto& i : ids) i = static_cast<int32_t>(rng() % vocab);
  const auto tc = weight(cpu(), vocab, d, table), tg = weight(*gpu(), vocab, d, table);
  const auto ic = put_i32(cpu(), {n}, ids), ig = put_i32(*gpu(), {n}, ids);
  const auto oc = empty(cpu(), DType::f32, {n, d}), og = empty(*gpu(), DType::bf16, {n, d});
  cpu().embedding(tc.tensor, ic.tensor, oc.tensor);
  gpu()->embedding(tg.tensor, ig.tensor, og.tensor);
  EXPECT_EQ(get(*gpu(), og.tensor), get(cpu(), oc.tensor));  // a copy of bf16 values: exact

  const std::vector<int32_t> rows = {16, 0, 3, 3, 9};
  const auto rc = put_i32(cpu(), {5}, rows), rg = put_i32(*gpu(), {5}, rows);
  const auto gc = empty(cpu(), DType::f32, {5, d}), gg = empty(*gpu(), DType::bf16, {5, d});
  cpu().gather_rows(oc.tensor, rc.tensor, gc.tensor);
  gpu()->gather_rows(og.tensor, rg.tensor, gg.tensor);
  EXPECT_EQ(get(*gpu(), gg.tensor), get(cpu(), gc.tensor));
}

// LoRA's delta: src rows added into the rows of y that `rows` names (distinct indices, as
// LoraSet passes them), the rest of y untouched.
TEST(GpuOps, ScatterAddRows) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(21);
  const int64_t n = 13, d = 640;
  const auto y = random_values(rng, n * d, -2, 2), src = random_values(rng, 5 * d, -2, 2);
  const std::vector<int32_t> rows = {12, 0, 7, 3, 8};
  const auto yc = put(cpu(), DType::f32, {n, d}, y), yg = put(*gpu(), DType::bf16, {n, d}, y);
  const auto sc = put(cpu(), DType::f32, {5, d}, src), sg = put(*gpu(), DType::bf16, {5, d}, src);
  const auto rc = put_i32(cpu(), {5}, rows), rg = put_i32(*gpu(), {5}, rows);
  cpu().scatter_add_rows(yc.tensor, rc.tensor, sc.tensor);
  gpu()->scatter_add_rows(yg.tensor, rg.tensor, sg.tensor);
  EXPECT_LT(rel_error(get(*gpu(), yg.tensor), get(cpu(), yc.tensor)), kBf16Tol);
  const auto untouched = get(*gpu(), yg.tensor);
  const auto before = get(*gpu(), put(*gpu(), DType::bf16, {n, d}, y).tensor);
  for (int64_t c = 0; c < d; ++c) EXPECT_EQ(untouched[static_cast<size_t>(1 * d + c)], before[static_cast<size_t>(1 * d + c)]);
}

TEST(GpuOps, RmsNormAndAddRmsNorm) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (const int64_t d : {64, 4096, 5000}) {
    SCOPED_TRACE(d);
    const int64_t n = 9;
    const auto x = random_values(rng, n * d, -3, 3), r = random_values(rng, n * d, -3, 3), w = random_values(rng, d, 0.5f, 1.5f);
    const auto xc = put(cpu(), DType::f32, {n, d}, x), xg = put(*gpu(), DType::bf16, {n, d}, x);
    const auto wc = put(cpu(), DType::f32, {d}, w), wg = put(*gpu(), DType::f32, {d}, w);
    const auto oc = empty(cpu(), DType::f32, {n, d}), og = empty(*gpu(), DType::bf16, {n, d});
    cpu().rms_norm(xc.tensor, wc.tensor, 1e-5f, oc.tensor);
    gpu()->rms_norm(xg.tensor, wg.tensor, 1e-5f, og.tensor);
    EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), kBf16Tol);

    const auto rc = put(cpu(), DType::f32, {n, d}, r), rg = put(*gpu(), DType::bf16, {n, d}, r);
    cpu().add_rms_norm(rc.tensor, xc.tensor, wc.tensor, 1e-5f, oc.tensor);
    gpu()->add_rms_norm(rg.tensor, xg.tensor, wg.tensor, 1e-5f, og.tensor);
    EXPECT_LT(rel_error(get(*gpu(), rg.tensor), get(cpu(), rc.tensor)), kBf16Tol);
    EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), kBf16Tol);
  }
}

TEST(GpuOps, AddAndSiluMul) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(4);
  const int64_t n = 13, inter = 700;
  const auto a = random_values(rng, n * inter, -4, 4), b = random_values(rng, n * inter, -4, 4);
  const auto ac = put(cpu(), DType::f32, {n, inter}, a), ag = put(*gpu(), DType::bf16, {n, inter}, a);
  const auto bc = put(cpu(), DType::f32, {n, inter}, b), bg = put(*gpu(), DType::bf16, {n, inter}, b);
  cpu().add(ac.tensor, bc.tensor);
  gpu()->add(ag.tensor, bg.tensor);
  EXPECT_LT(rel_error(get(*gpu(), ag.tensor), get(cpu(), ac.tensor)), kBf16Tol);
  // add_row_bias (phimoe GGUF's RMSNorm biases): one f32 row added to every bf16 row.
  const auto bias = random_values(rng, inter, -1, 1);
  const auto biasc = put(cpu(), DType::f32, {inter}, bias), biasg = put(*gpu(), DType::f32, {inter}, bias);
  cpu().add_row_bias(ac.tensor, biasc.tensor);
  gpu()->add_row_bias(ag.tensor, biasg.tensor);
  EXPECT_LT(rel_error(get(*gpu(), ag.tensor), get(cpu(), ac.tensor)), kBf16Tol);

  const auto gu = random_values(rng, n * 2 * inter, -6, 6);
  const auto gc = put(cpu(), DType::f32, {n, 2 * inter}, gu), gg = put(*gpu(), DType::bf16, {n, 2 * inter}, gu);
  const auto oc = empty(cpu(), DType::f32, {n, inter}), og = empty(*gpu(), DType::bf16, {n, inter});
  cpu().silu_mul(gc.tensor, oc.tensor);
  gpu()->silu_mul(gg.tensor, og.tensor);
  EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), kBf16Tol);
}

// Gemma's ops: gelu_tanh_mul (bf16 activations; and ModernBERT's exact gelu_mul), scale (bf16) and
// softcap (f32 logits).
TEST(GpuOps, GeluTanhMulScaleAndSoftcap) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(11);
  const int64_t n = 13, inter = 700;
  const auto gu = random_values(rng, n * 2 * inter, -6, 6);
  const auto gc = put(cpu(), DType::f32, {n, 2 * inter}, gu), gg = put(*gpu(), DType::bf16, {n, 2 * inter}, gu);
  const auto oc = empty(cpu(), DType::f32, {n, inter}), og = empty(*gpu(), DType::bf16, {n, inter});
  cpu().gelu_tanh_mul(gc.tensor, oc.tensor);
  gpu()->gelu_tanh_mul(gg.tensor, og.tensor);
  EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), kBf16Tol);
  cpu().gelu_mul(gc.tensor, oc.tensor);  // the exact GELU (ModernBERT's)
  gpu()->gelu_mul(gg.tensor, og.tensor);
  EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), kBf16Tol);

  const auto x = random_values(rng, n * inter, -4, 4);
  const auto xc = put(cpu(), DType::f32, {n, inter}, x), xg = put(*gpu(), DType::bf16, {n, inter}, x);
  cpu().scale(xc.tensor, 48.0f);
  gpu()->scale(xg.tensor, 48.0f);
  EXPECT_LT(rel_error(get(*gpu(), xg.tensor), get(cpu(), xc.tensor)), kBf16Tol);

  const auto logits = random_values(rng, n * inter, -100, 100);
  const auto lc = put(cpu(), DType::f32, {n, inter}, logits), lg = put(*gpu(), DType::f32, {n, inter}, logits);
  cpu().softcap(lc.tensor, 30.0f);
  gpu()->softcap(lg.tensor, 30.0f);
  EXPECT_LT(rel_error(get(*gpu(), lg.tensor), get(cpu(), lc.tensor)), 1e-5);
}

// clamp (OLMo's clip_qkv, Gemma 4's clipped linears): bf16 in place, one bound infinite or both
// finite, a NaN kept.
TEST(GpuOps, ClampMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(13);
  const int64_t n = 9, m = 1000;
  auto x = random_values(rng, n * m, -20, 20);
  x[17] = NAN;
  for (const auto& [lo, hi] : {std::pair{-8.0f, 8.0f}, std::pair{-INFINITY, 3.5f}, std::pair{-2.0f, INFINITY}}) {
    const auto xc = put(cpu(), DType::f32, {n, m}, x), xg = put(*gpu(), DType::bf16, {n, m}, x);
    cpu().clamp(xc.tensor, lo, hi);
    gpu()->clamp(xg.tensor, lo, hi);
    auto got = get(*gpu(), xg.tensor), want = get(cpu(), xc.tensor);
    EXPECT_TRUE(std::isnan(got[17]));
    got[17] = want[17] = 0.0f;
    EXPECT_LT(rel_error(got, want), kBf16Tol);
    EXPECT_LE(*std::max_element(got.begin(), got.end()), hi);
    EXPECT_GE(*std::min_element(got.begin(), got.end()), lo);
  }
}

TEST(GpuOps, QkHeadNormAndRope) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(5);
  const QkvLayout l{8, 2, 64};
  const int64_t n = 11;
  for (const RopeStyle style : {RopeStyle::neox, RopeStyle::interleaved}) {
    const auto qkv = random_values(rng, n * l.row_width(), -2, 2), qw = random_values(rng, l.head_dim, 0.5f, 1.5f),
               kw = random_values(rng, l.head_dim, 0.5f, 1.5f);
    const auto qc = put(cpu(), DType::f32, {n, l.row_width()}, qkv), qg = put(*gpu(), DType::bf16, {n, l.row_width()}, qkv);
    const auto qwc = put(cpu(), DType::f32, {l.head_dim}, qw), qwg = put(*gpu(), DType::f32, {l.head_dim}, qw);
    const auto kwc = put(cpu(), DType::f32, {l.head_dim}, kw), kwg = put(*gpu(), DType::f32, {l.head_dim}, kw);
    cpu().qk_head_norm(qc.tensor, l, qwc.tensor, kwc.tensor, 1e-6f);
    gpu()->qk_head_norm(qg.tensor, l, qwg.tensor, kwg.tensor, 1e-6f);
    EXPECT_LT(rel_error(get(*gpu(), qg.tensor), get(cpu(), qc.tensor)), kBf16Tol);

    std::vector<int32_t> pos(n);
    for (auto& p : pos) p = static_cast<int32_t>(rng() % 6000);
    RopeConfig rope;
    rope.style = style;
    rope.rotary_dim = 48;  // partial rotary: the last 16 dims of each head pass through
    for (int i = 0; i < rope.rotary_dim / 2; ++i) rope.inv_freq.push_back(std::pow(10000.0f, -2.0f * i / rope.rotary_dim));
    rope.attention_factor = 1.1f;
    const auto pc = put_i32(cpu(), {n}, pos), pg = put_i32(*gpu(), {n}, pos);
    cpu().rope(qc.tensor, l, pc.tensor, rope);
    gpu()->rope(qg.tensor, l, pg.tensor, rope);
    EXPECT_LT(rel_error(get(*gpu(), qg.tensor), get(cpu(), qc.tensor)), kBf16Tol);
  }
}

// The ungated GELUs (StarCoder2's and Phi's gelu_tanh, Pythia's exact gelu) in place.
TEST(GpuOps, UngatedGeluMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  ASSERT_TRUE(gpu()->supports_gelu());
  std::mt19937 rng(54);
  const int64_t n = 9, d = 700;
  const auto x = random_values(rng, n * d, -6, 6);
  for (const bool exact : {false, true}) {
    SCOPED_TRACE(exact ? "gelu" : "gelu_tanh");
    const auto xc = put(cpu(), DType::f32, {n, d}, x), xg = put(*gpu(), DType::bf16, {n, d}, x);
    if (exact) {
      cpu().gelu(xc.tensor);
      gpu()->gelu(xg.tensor);
    } else {
      cpu().gelu_tanh(xc.tensor);
      gpu()->gelu_tanh(xg.tensor);
    }
    EXPECT_LT(rel_error(get(*gpu(), xg.tensor), get(cpu(), xc.tensor)), kBf16Tol);
  }
}

// Apertus's xIELU: both branches (values around 0 and past eps) against the CPU's.
TEST(GpuOps, Xielu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(53);
  const int64_t n = 9, d = 300;
  const auto x = random_values(rng, n * d, -6, 6);
  const auto xc = put(cpu(), DType::f32, {n, d}, x), xg = put(*gpu(), DType::bf16, {n, d}, x);
  const XieluParams p{1.3f, 0.9f, 0.5f, -1e-6f};
  cpu().xielu(xc.tensor, p);
  gpu()->xielu(xg.tensor, p);
  EXPECT_LT(rel_error(get(*gpu(), xg.tensor), get(cpu(), xc.tensor)), kBf16Tol);
}

// The query temperature on the q heads (Llama 4's offset 1, Ministral 3's 0), positions on both
// sides of its steps.
TEST(GpuOps, AttentionTemperature) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(57);
  const QkvLayout l{8, 2, 64};
  const std::vector<int32_t> pos = {0, 2, 3, 4, 7, 8, 100, 8191, 8192, 50000};
  const int64_t n = static_cast<int64_t>(pos.size());
  for (const float offset : {1.0f, 0.0f}) {
    const auto qkv = random_values(rng, n * l.row_width(), -2, 2);
    const auto qc = put(cpu(), DType::f32, {n, l.row_width()}, qkv), qg = put(*gpu(), DType::bf16, {n, l.row_width()}, qkv);
    const auto pc = put_i32(cpu(), {n}, pos), pg = put_i32(*gpu(), {n}, pos);
    cpu().attention_temperature(qc.tensor, l, pc.tensor, 4.0f, 0.1f, offset);
    gpu()->attention_temperature(qg.tensor, l, pg.tensor, 4.0f, 0.1f, offset);
    EXPECT_LT(rel_error(get(*gpu(), qg.tensor), get(cpu(), qc.tensor)), kBf16Tol) << offset;
  }
}

// OLMo 2's q/k norms: weights over the whole q and k widths, each part normalised as one vector.
TEST(GpuOps, QkNormOverTheWholeWidth) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(51);
  const QkvLayout l{8, 2, 64};
  const int64_t n = 7;
  const auto qkv = random_values(rng, n * l.row_width(), -2, 2), qw = random_values(rng, l.q_width(), 0.5f, 1.5f),
             kw = random_values(rng, l.kv_width(), 0.5f, 1.5f);
  const auto qc = put(cpu(), DType::f32, {n, l.row_width()}, qkv), qg = put(*gpu(), DType::bf16, {n, l.row_width()}, qkv);
  const auto qwc = put(cpu(), DType::f32, {l.q_width()}, qw), qwg = put(*gpu(), DType::f32, {l.q_width()}, qw);
  const auto kwc = put(cpu(), DType::f32, {l.kv_width()}, kw), kwg = put(*gpu(), DType::f32, {l.kv_width()}, kw);
  cpu().qk_head_norm(qc.tensor, l, qwc.tensor, kwc.tensor, 1e-6f);
  gpu()->qk_head_norm(qg.tensor, l, qwg.tensor, kwg.tensor, 1e-6f);
  EXPECT_LT(rel_error(get(*gpu(), qg.tensor), get(cpu(), qc.tensor)), kBf16Tol);
}

// The whole-width norms' tensor-parallel pair: the sums of squares, then the scaling by given
// (all-reduced) sums, GPU against CPU.
TEST(GpuOps, QkNormBySums) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(59);
  const QkvLayout l{8, 2, 64};
  const int64_t n = 7;
  const auto qkv = random_values(rng, n * l.row_width(), -2, 2), qw = random_values(rng, l.q_width(), 0.5f, 1.5f),
             kw = random_values(rng, l.kv_width(), 0.5f, 1.5f), other = random_values(rng, 2 * n, 10.0f, 50.0f);
  const auto qc = put(cpu(), DType::f32, {n, l.row_width()}, qkv), qg = put(*gpu(), DType::bf16, {n, l.row_width()}, qkv);
  const auto sc = put(cpu(), DType::f32, {n, 2}, std::vector<float>(2 * n)), sg = put(*gpu(), DType::f32, {n, 2}, std::vector<float>(2 * n));
  cpu().qk_sum_squares(qc.tensor, l, sc.tensor);
  gpu()->qk_sum_squares(qg.tensor, l, sg.tensor);
  EXPECT_LT(rel_error(get(*gpu(), sg.tensor), get(cpu(), sc.tensor)), kBf16Tol);
  // Another rank's share added, as the all-reduce would.
  std::vector<float> total = get(cpu(), sc.tensor);
  for (size_t i = 0; i < total.size(); ++i) total[i] += other[i];
  const auto tc = put(cpu(), DType::f32, {n, 2}, total), tg = put(*gpu(), DType::f32, {n, 2}, total);
  const auto qwc = put(cpu(), DType::f32, {l.q_width()}, qw), qwg = put(*gpu(), DType::f32, {l.q_width()}, qw);
  const auto kwc = put(cpu(), DType::f32, {l.kv_width()}, kw), kwg = put(*gpu(), DType::f32, {l.kv_width()}, kw);
  cpu().qk_norm_by_sums(qc.tensor, l, tc.tensor, 2 * l.q_width(), 2 * l.kv_width(), qwc.tensor, kwc.tensor, 1e-6f);
  gpu()->qk_norm_by_sums(qg.tensor, l, tg.tensor, 2 * l.q_width(), 2 * l.kv_width(), qwg.tensor, kwg.tensor, 1e-6f);
  EXPECT_LT(rel_error(get(*gpu(), qg.tensor), get(cpu(), qc.tensor)), kBf16Tol);
}

// Cohere's norms: LayerNorm rows without a bias (the decoder's) and with one (the towers'), rows
// offset from zero so the mean matters; Command R+'s per-head q/k LayerNorms, each head with its
// own weights.
TEST(GpuOps, LayerNormAndQkHeadLayerNorm) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(61);
  for (const int64_t d : {64, 1000, 4096}) {
    SCOPED_TRACE(testing::Message() << "d=" << d);
    const int64_t n = 5;
    const auto x = random_values(rng, n * d, 1, 4), w = random_values(rng, d, 0.5f, 1.5f), b = random_values(rng, d);
    const auto xc = put(cpu(), DType::f32, {n, d}, x), xg = put(*gpu(), DType::bf16, {n, d}, x);
    const auto wc = put(cpu(), DType::f32, {d}, w), wg = put(*gpu(), DType::f32, {d}, w);
    const auto bc = put(cpu(), DType::f32, {d}, b), bg = put(*gpu(), DType::f32, {d}, b);
    for (const bool bias : {false, true}) {
      const auto oc = empty(cpu(), DType::f32, {n, d}), og = empty(*gpu(), DType::bf16, {n, d});
      cpu().layer_norm(xc.tensor, wc.tensor, bias ? bc.tensor : Tensor(), 1e-5f, oc.tensor);
      gpu()->layer_norm(xg.tensor, wg.tensor, bias ? bg.tensor : Tensor(), 1e-5f, og.tensor);
      EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), kBf16Tol) << "bias " << bias;
    }
  }
  const QkvLayout l{8, 2, 64};
  const int64_t n = 7;
  const auto qkv = random_values(rng, n * l.row_width(), -1, 3), qw = random_values(rng, l.q_width(), 0.5f, 1.5f),
             kw = random_values(rng, l.kv_width(), 0.5f, 1.5f);
  const auto qc = put(cpu(), DType::f32, {n, l.row_width()}, qkv), qg = put(*gpu(), DType::bf16, {n, l.row_width()}, qkv);
  const auto qwc = put(cpu(), DType::f32, {l.q_width()}, qw), qwg = put(*gpu(), DType::f32, {l.q_width()}, qw);
  const auto kwc = put(cpu(), DType::f32, {l.kv_width()}, kw), kwg = put(*gpu(), DType::f32, {l.kv_width()}, kw);
  cpu().qk_head_layer_norm(qc.tensor, l, qwc.tensor, kwc.tensor, 1e-5f);
  gpu()->qk_head_layer_norm(qg.tensor, l, qwg.tensor, kwg.tensor, 1e-5f);
  EXPECT_LT(rel_error(get(*gpu(), qg.tensor), get(cpu(), qc.tensor)), kBf16Tol);
}

TEST(GpuOps, WriteKvIntoPages) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(6);
  const QkvLayout l{4, 2, 32};
  const int64_t n = 10, n_pages = 5, page_size = 4;
  const auto qkv = random_values(rng, n * l.row_width());
  std::vector<int32_t> slots = {0, 5, 19, -1, 7, 12, 13, 1, -1, 18};
  for (const DType kv : {DType::bf16, DType::f32}) {
    const std::vector<float> zeros(static_cast<size_t>(n_pages * page_size * l.kv_width()), 0.0f);
    const auto kc = put(cpu(), kv, {n_pages, page_size, l.n_kv_heads, l.head_dim}, zeros),
               vc = put(cpu(), kv, {n_pages, page_size, l.n_kv_heads, l.head_dim}, zeros);
    const auto kg = put(*gpu(), kv, {n_pages, page_size, l.n_kv_heads, l.head_dim}, zeros),
               vg = put(*gpu(), kv, {n_pages, page_size, l.n_kv_heads, l.head_dim}, zeros);
    const auto qc = put(cpu(), DType::f32, {n, l.row_width()}, qkv), qg = put(*gpu(), DType::bf16, {n, l.row_width()}, qkv);
    const auto sc = put_i32(cpu(), {n}, slots), sg = put_i32(*gpu(), {n}, slots);
    cpu().write_kv({kc.tensor, vc.tensor}, qc.tensor, l, sc.tensor);
    gpu()->write_kv({kg.tensor, vg.tensor}, qg.tensor, l, sg.tensor);
    EXPECT_EQ(get(*gpu(), kg.tensor), get(cpu(), kc.tensor));  // bf16 inputs copy exactly
    EXPECT_EQ(get(*gpu(), vg.tensor), get(cpu(), vc.tensor));
  }
}

// KvCache::copy_rows through CudaBackend::copy (a device-to-device copy): the leading rows of a
// page land in another page as on the CPU, the rest of it untouched (a prefix-cache match ending
// inside a cached page).
TEST(GpuOps, KvCopyRowsMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  KvLayout layout;
  layout.n_layers = 3;
  layout.n_pages = 6;
  layout.page_size = 16;
  layout.n_kv_heads = 2;
  layout.head_dim = 64;
  layout.dtype = DType::bf16;
  auto on_gpu = KvCache::allocate(*gpu(), layout);
  auto on_cpu = KvCache::allocate(cpu(), layout);
  ASSERT_TRUE(on_gpu.has_value() && on_cpu.has_value());
  std::vector<std::byte> page(layout.page_bytes());
  for (int32_t p = 0; p < layout.n_pages; ++p) {
    for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<std::byte>((i * 31 + static_cast<size_t>(p) * 7) % 251);
    ASSERT_TRUE(on_gpu->write_page(*gpu(), p, page).is_ok());
    ASSERT_TRUE(on_cpu->write_page(cpu(), p, page).is_ok());
  }
  ASSERT_TRUE(on_gpu->copy_rows(*gpu(), 1, 4, 11).is_ok());
  ASSERT_TRUE(on_cpu->copy_rows(cpu(), 1, 4, 11).is_ok());
  std::vector<std::byte> got(layout.page_bytes()), want(layout.page_bytes());
  for (int32_t p = 0; p < layout.n_pages; ++p) {
    ASSERT_TRUE(on_gpu->read_page(*gpu(), p, got).is_ok());
    ASSERT_TRUE(on_cpu->read_page(cpu(), p, want).is_ok());
    EXPECT_EQ(got, want) << "page " << p;
  }
}

TEST(GpuOps, DeviceCountWithoutGpuIsZeroNotAnError) {
  // Runs everywhere: without a device this must return 0 and make_cuda_backend must fail cleanly.
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  if (n == 0) {
    auto b = make_cuda_backend();
    ASSERT_FALSE(b.has_value());
    EXPECT_EQ(b.status().code(), StatusCode::unsupported);
  }
}

}  // namespace
}  // namespace brigade
