// The element-wise and row ops, memory and weight preparation, against direct references.
// rms_norm and interleaved rope must equal llama2.c's run.c bit for bit (the stories260K greedy
// output depends on it), so their references are run.c's f32 code; the others use double with
// a 1e-5 relative tolerance.
#include <cmath>
#include <cstdio>
#include <cstdint>

#include "core/sampling.h"
#include "tests/cpu/cpu_test_util.h"

// AllocateAlignsAndCopies asks for an impossible size and expects out_of_resources: sanitizer
// allocators must return null for it instead of aborting the process.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace brigade {
namespace {

using test::backend_at;
using test::get;
using test::make;

// llama2.c run.c rmsnorm, verbatim apart from names.
void llama2c_rmsnorm(float* o, const float* x, const float* weight, int size) {
  float ss = 0.0f;
  for (int j = 0; j < size; j++) ss += x[j] * x[j];
  ss /= static_cast<float>(size);
  ss += 1e-5f;
  ss = 1.0f / sqrtf(ss);
  for (int j = 0; j < size; j++) o[j] = weight[j] * (ss * x[j]);
}

TEST(CpuOps, RmsNormMatchesLlama2c) {
  for (const std::string& level : test::simd_levels()) {
    std::mt19937 rng(1);
    auto b = backend_at(level);
    for (int64_t d : {1, 7, 64, 288}) {
      auto x = make(*b, DType::f32, {5, d});
      auto w = make(*b, DType::f32, {d});
      auto out = make(*b, DType::f32, {5, d});
      test::fill_uniform(x.tensor, rng, -3, 3);
      test::fill_uniform(w.tensor, rng);
      b->rms_norm(x.tensor, w.tensor, 1e-5f, out.tensor);
      std::vector<float> ref(static_cast<size_t>(d));
      for (int64_t i = 0; i < 5; ++i) {
        llama2c_rmsnorm(ref.data(), x.tensor.as<float>() + i * d, w.tensor.as<float>(), static_cast<int>(d));
        for (int64_t j = 0; j < d; ++j) ASSERT_EQ(out.tensor.as<float>()[i * d + j], ref[static_cast<size_t>(j)]);
      }
    }
  }
}

TEST(CpuOps, AddRmsNormUpdatesResidual) {
  std::mt19937 rng(2);
  auto b = backend_at(test::simd_levels().back());
  const int64_t n = 3, d = 50;
  auto res = make(*b, DType::f32, {n, d});
  auto x = make(*b, DType::f32, {n, d});
  auto w = make(*b, DType::bf16, {d});
  auto out = make(*b, DType::f32, {n, d});
  test::fill_uniform(res.tensor, rng);
  test::fill_uniform(x.tensor, rng);
  test::fill_uniform(w.tensor, rng);
  const std::vector<float> r0 = test::to_vector(res.tensor);
  b->add_rms_norm(res.tensor, x.tensor, w.tensor, 1e-6f, out.tensor);
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double r = r0[static_cast<size_t>(i * d + j)] + get(x.tensor, i * d + j);
      EXPECT_NEAR(get(res.tensor, i * d + j), r, 1e-6);
      ss += r * r;
    }
    const double inv = 1.0 / std::sqrt(ss / d + 1e-6);
    for (int64_t j = 0; j < d; ++j)
      EXPECT_NEAR(get(out.tensor, i * d + j), get(res.tensor, i * d + j) * inv * get(w.tensor, j), 1e-5);
  }
}

TEST(CpuOps, SiluMulIsWithinAFewUlpAtEveryLevel) {
  // The SIMD levels compute exp with a polynomial (cpu/kernels_avx2.cpp vexp); against a double
  // reference over gates from -100 to 100 (both clamps of that exp included) the result must stay
  // within 4 ulp-sized relative steps (2^-23) of silu(g) * u, as expf-based code does (plus 1e-30
  // absolute: far below zero silu underflows to -0 in float, expf included).
  std::vector<float> gates;
  for (float g = -100.0f; g <= 100.0f; g += 0.0137f) gates.push_back(g);
  for (float g : {0.0f, -0.0f, 1e-30f, -1e-30f, 87.3f, -87.3f, 88.0f, -88.0f, 88.5f, -88.5f}) gates.push_back(g);
  const int64_t inter = static_cast<int64_t>(gates.size());
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level);
    auto gu = make(*b, DType::f32, {1, 2 * inter});
    auto out = make(*b, DType::f32, {1, inter});
    for (int64_t j = 0; j < inter; ++j) {
      gu.tensor.as<float>()[j] = gates[static_cast<size_t>(j)];
      gu.tensor.as<float>()[inter + j] = 1.0f + 0.001f * static_cast<float>(j % 7);
    }
    b->silu_mul(gu.tensor, out.tensor);
    for (int64_t j = 0; j < inter; ++j) {
      const double g = gates[static_cast<size_t>(j)], u = gu.tensor.as<float>()[inter + j];
      const double want = g / (1.0 + std::exp(-g)) * u;
      const double got = out.tensor.as<float>()[j];
      ASSERT_NEAR(got, want, 4.0 * std::ldexp(std::fabs(want), -23) + 1e-30) << level << " g " << g;
    }
  }
}

TEST(CpuOps, AddAndSiluMul) {
  std::mt19937 rng(3);
  auto b = backend_at(test::simd_levels().back());
  const int64_t n = 4, inter = 37;
  auto a = make(*b, DType::f32, {n, inter});
  auto c = make(*b, DType::f32, {n, inter});
  test::fill_uniform(a.tensor, rng);
  test::fill_uniform(c.tensor, rng);
  const std::vector<float> a0 = test::to_vector(a.tensor);
  b->add(a.tensor, c.tensor);
  for (int64_t i = 0; i < n * inter; ++i)
    EXPECT_FLOAT_EQ(a.tensor.as<float>()[i], a0[static_cast<size_t>(i)] + c.tensor.as<float>()[i]);
  // add_row_bias: the one row of biases added to every row.
  auto bias = make(*b, DType::f32, {inter});
  test::fill_uniform(bias.tensor, rng);
  const std::vector<float> a1 = test::to_vector(a.tensor);
  b->add_row_bias(a.tensor, bias.tensor);
  for (int64_t i = 0; i < n * inter; ++i)
    EXPECT_FLOAT_EQ(a.tensor.as<float>()[i], a1[static_cast<size_t>(i)] + bias.tensor.as<float>()[i % inter]) << i;
  auto gu = make(*b, DType::f32, {n, 2 * inter});
  auto out = make(*b, DType::f32, {n, inter});
  test::fill_uniform(gu.tensor, rng, -6, 6);
  b->silu_mul(gu.tensor, out.tensor);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inter; ++j) {
      const double g = get(gu.tensor, i * 2 * inter + j), u = get(gu.tensor, i * 2 * inter + inter + j);
      EXPECT_NEAR(get(out.tensor, i * inter + j), g / (1 + std::exp(-g)) * u, 1e-5);
    }
}

// gelu_tanh_mul against torch's gelu(approximate='tanh') (values printed by torch 2.15 in f32)
// and against the formula in double over many gates (gelu_mul: the exact GELU's); scale and
// softcap against the formula.
TEST(CpuOps, GeluTanhMulScaleAndSoftcap) {
  const std::vector<float> gates = {-6.0f, -3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 2.0f, 5.0f};
  const std::vector<double> torch_gelu = {-0.0,       -0.00363743305, -0.158807993, -0.154285997, 0.0,
                                          0.345714003, 0.841192007,   1.95459771,   4.99999952};
  std::mt19937 rng(5);
  auto b = backend_at(test::simd_levels().back());
  const int64_t k = static_cast<int64_t>(gates.size());
  auto gu = make(*b, DType::f32, {1, 2 * k});
  auto out = make(*b, DType::f32, {1, k});
  for (int64_t j = 0; j < k; ++j) {
    gu.tensor.as<float>()[j] = gates[static_cast<size_t>(j)];
    gu.tensor.as<float>()[k + j] = 1.0f;
  }
  b->gelu_tanh_mul(gu.tensor, out.tensor);
  for (int64_t j = 0; j < k; ++j)
    EXPECT_NEAR(out.tensor.as<float>()[j], torch_gelu[static_cast<size_t>(j)], 1e-6) << gates[static_cast<size_t>(j)];
  const int64_t n = 5, inter = 41;
  auto gu2 = make(*b, DType::f32, {n, 2 * inter});
  auto out2 = make(*b, DType::f32, {n, inter});
  test::fill_uniform(gu2.tensor, rng, -8, 8);
  b->gelu_tanh_mul(gu2.tensor, out2.tensor);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inter; ++j) {
      const double g = get(gu2.tensor, i * 2 * inter + j), u = get(gu2.tensor, i * 2 * inter + inter + j);
      const double want = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u;
      EXPECT_NEAR(get(out2.tensor, i * inter + j), want, 1e-5 * (1 + std::fabs(want)));
    }
  b->gelu_mul(gu2.tensor, out2.tensor);  // the exact (erf) GELU of the gate
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inter; ++j) {
      const double g = get(gu2.tensor, i * 2 * inter + j), u = get(gu2.tensor, i * 2 * inter + inter + j);
      const double want = 0.5 * g * (1 + std::erf(g / std::sqrt(2.0))) * u;
      EXPECT_NEAR(get(out2.tensor, i * inter + j), want, 1e-5 * (1 + std::fabs(want)));
    }
  auto x = make(*b, DType::f32, {n, inter});
  test::fill_uniform(x.tensor, rng, -50, 50);
  const std::vector<float> x0 = test::to_vector(x.tensor);
  b->scale(x.tensor, 3.5f);
  for (int64_t i = 0; i < x.tensor.numel(); ++i) EXPECT_EQ(x.tensor.as<float>()[i], x0[static_cast<size_t>(i)] * 3.5f);
  b->softcap(x.tensor, 30.0f);
  for (int64_t i = 0; i < x.tensor.numel(); ++i) {
    const double want = std::tanh(x0[static_cast<size_t>(i)] * 3.5 / 30.0) * 30.0;
    EXPECT_NEAR(x.tensor.as<float>()[i], want, 1e-5 * 30.0);
    EXPECT_LT(std::fabs(x.tensor.as<float>()[i]), 30.0f);
  }
}

// clamp as torch.clamp: values past a bound become the bound, an infinite bound clamps nothing,
// NaN stays NaN.
TEST(CpuOps, Clamp) {
  auto b = backend_at(test::simd_levels().back());
  const std::vector<float> x0 = {-9.0f, -8.0f, -7.5f, 0.0f, 7.99f, 8.0f, 8.5f, INFINITY, -INFINITY, NAN};
  auto x = make(*b, DType::f32, {2, 5});
  std::copy(x0.begin(), x0.end(), x.tensor.as<float>());
  b->clamp(x.tensor, -8.0f, 8.0f);
  const std::vector<float> want = {-8.0f, -8.0f, -7.5f, 0.0f, 7.99f, 8.0f, 8.0f, 8.0f, -8.0f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(x.tensor.as<float>()[i], want[i]) << i;
  EXPECT_TRUE(std::isnan(x.tensor.as<float>()[9]));
  std::copy(x0.begin(), x0.end(), x.tensor.as<float>());
  b->clamp(x.tensor, -INFINITY, 0.5f);
  EXPECT_EQ(x.tensor.as<float>()[0], -9.0f);
  EXPECT_EQ(x.tensor.as<float>()[8], -INFINITY);
  EXPECT_EQ(x.tensor.as<float>()[4], 0.5f);
}

TEST(CpuOps, EmbeddingAllDtypes) {
  std::mt19937 rng(4);
  auto b = backend_at(test::simd_levels().back());
  auto host = make(*b, DType::f32, {11, 19});
  test::fill_uniform(host.tensor, rng);
  auto ids = make(*b, DType::i32, {4});
  const int32_t id_values[4] = {10, 0, 3, 10};
  std::copy_n(id_values, 4, ids.tensor.as<int32_t>());
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    auto table = b->prepare_weight(host.tensor, t);
    ASSERT_TRUE(table.has_value());
    auto out = make(*b, DType::f32, {4, 19});
    b->embedding(table->tensor, ids.tensor, out.tensor);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 19; ++j)
        EXPECT_EQ(get(out.tensor, i * 19 + j), get(table->tensor, id_values[i] * 19 + j));
  }
}

TEST(CpuOps, QkHeadNormTouchesOnlyQAndK) {
  std::mt19937 rng(5);
  auto b = backend_at(test::simd_levels().back());
  const QkvLayout l{4, 2, 12};
  auto qkv = make(*b, DType::f32, {3, l.row_width()});
  auto qw = make(*b, DType::f32, {12});
  auto kw = make(*b, DType::f16, {12});
  test::fill_uniform(qkv.tensor, rng);
  test::fill_uniform(qw.tensor, rng);
  test::fill_uniform(kw.tensor, rng);
  const std::vector<float> before = test::to_vector(qkv.tensor);
  b->qk_head_norm(qkv.tensor, l, qw.tensor, kw.tensor, 1e-6f);
  for (int64_t i = 0; i < 3; ++i) {
    for (int h = 0; h < l.n_heads + 2 * l.n_kv_heads; ++h) {
      const int64_t off = i * l.row_width() + h * 12;
      const bool is_v = h >= l.n_heads + l.n_kv_heads;
      const Tensor& w = h < l.n_heads ? qw.tensor : kw.tensor;
      double ss = 0;
      for (int e = 0; e < 12; ++e) ss += double(before[static_cast<size_t>(off + e)]) * before[static_cast<size_t>(off + e)];
      const double inv = 1.0 / std::sqrt(ss / 12 + 1e-6);
      for (int e = 0; e < 12; ++e) {
        const double x = before[static_cast<size_t>(off + e)];
        EXPECT_NEAR(get(qkv.tensor, off + e), is_v ? x : x * inv * get(w, e), 1e-5) << h;
      }
    }
  }
}

// Command R+'s q/k LayerNorms against their formula in double: each q and k head mean-centred and
// scaled by its own weights (q head h by qw[h * 12 ...], k head h by kw[h * 12 ...]); v untouched.
TEST(CpuOps, QkHeadLayerNormUsesEachHeadsWeights) {
  std::mt19937 rng(55);
  auto b = backend_at(test::simd_levels().back());
  const QkvLayout l{4, 2, 12};
  auto qkv = make(*b, DType::f32, {3, l.row_width()});
  auto qw = make(*b, DType::f32, {l.q_width()});
  auto kw = make(*b, DType::bf16, {l.kv_width()});
  test::fill_uniform(qkv.tensor, rng);
  for (int64_t i = 0; i < qkv.tensor.numel(); ++i) qkv.tensor.as<float>()[i] += 2.0f;  // the mean matters
  test::fill_uniform(qw.tensor, rng);
  test::fill_uniform(kw.tensor, rng);
  const std::vector<float> before = test::to_vector(qkv.tensor);
  b->qk_head_layer_norm(qkv.tensor, l, qw.tensor, kw.tensor, 1e-5f);
  for (int64_t i = 0; i < 3; ++i) {
    for (int h = 0; h < l.n_heads + 2 * l.n_kv_heads; ++h) {
      const int64_t off = i * l.row_width() + h * 12;
      const bool is_q = h < l.n_heads, is_v = h >= l.n_heads + l.n_kv_heads;
      const Tensor& w = is_q ? qw.tensor : kw.tensor;
      const int64_t w0 = (is_q ? h : h - l.n_heads) * 12;
      double mean = 0, var = 0;
      for (int e = 0; e < 12; ++e) mean += before[static_cast<size_t>(off + e)] / 12.0;
      for (int e = 0; e < 12; ++e) var += std::pow(before[static_cast<size_t>(off + e)] - mean, 2) / 12.0;
      for (int e = 0; e < 12; ++e) {
        const double x = before[static_cast<size_t>(off + e)];
        const double want = is_v ? x : (x - mean) / std::sqrt(var + 1e-5) * get(w, w0 + e);
        EXPECT_NEAR(get(qkv.tensor, off + e), want, 1e-5) << "head " << h;
      }
    }
  }
  // The decoder's LayerNorm without a bias: the same formula over whole rows.
  auto x = make(*b, DType::f32, {2, 40});
  auto w = make(*b, DType::f32, {40});
  auto out = make(*b, DType::f32, {2, 40});
  test::fill_uniform(x.tensor, rng);
  test::fill_uniform(w.tensor, rng);
  b->layer_norm(x.tensor, w.tensor, Tensor(), 1e-5f, out.tensor);
  for (int64_t i = 0; i < 2; ++i) {
    double mean = 0, var = 0;
    for (int e = 0; e < 40; ++e) mean += get(x.tensor, i * 40 + e) / 40.0;
    for (int e = 0; e < 40; ++e) var += std::pow(get(x.tensor, i * 40 + e) - mean, 2) / 40.0;
    for (int e = 0; e < 40; ++e)
      EXPECT_NEAR(get(out.tensor, i * 40 + e), (get(x.tensor, i * 40 + e) - mean) / std::sqrt(var + 1e-5) * get(w.tensor, e),
                  1e-5);
  }
}

// Apertus's xIELU against its formula in double: x > 0: alpha_p x^2 + beta x; else
// (expm1(min(x, eps)) - x) alpha_n + beta x, values around 0 and eps included.
TEST(CpuOps, XieluFollowsItsFormula) {
  std::mt19937 rng(54);
  auto b = backend_at(test::simd_levels().back());
  auto x = make(*b, DType::f32, {4, 33});
  test::fill_uniform(x.tensor, rng);
  for (int64_t i = 0; i < x.tensor.numel(); ++i) x.tensor.as<float>()[i] *= 8.0f;
  x.tensor.as<float>()[0] = 0.0f;
  x.tensor.as<float>()[1] = -5e-7f;  // between eps and 0: expm1(eps)
  const std::vector<float> before = test::to_vector(x.tensor);
  const XieluParams p{1.3f, 0.9f, 0.5f, -1e-6f};
  b->xielu(x.tensor, p);
  for (size_t i = 0; i < before.size(); ++i) {
    const double t = before[i];
    const double want = t > 0 ? p.alpha_p * t * t + p.beta * t : (std::expm1(std::min(t, double{p.eps})) - t) * p.alpha_n + p.beta * t;
    EXPECT_NEAR(get(x.tensor, static_cast<int64_t>(i)), want, 1e-5 * (1.0 + std::abs(want))) << t;
  }
}

// BitNet's gated relu2: relu(gate)^2 * up, gate and up the halves of each row.
TEST(CpuOps, Relu2MulSquaresThePositiveGate) {
  std::mt19937 rng(61);
  auto b = backend_at(test::simd_levels().back());
  auto gu = make(*b, DType::f32, {3, 2 * 17});
  auto out = make(*b, DType::f32, {3, 17});
  test::fill_uniform(gu.tensor, rng, -3, 3);
  b->relu2_mul(gu.tensor, out.tensor);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 17; ++j) {
      const double g = get(gu.tensor, i * 34 + j), u = get(gu.tensor, i * 34 + 17 + j);
      EXPECT_NEAR(get(out.tensor, i * 17 + j), g > 0 ? g * g * u : 0.0, 1e-6 * (1.0 + g * g * std::abs(u))) << i << " " << j;
    }
}

// transformers' BitLinear.activation_quant / ActQuant, transcribed: per row s = 127 / max(absmax,
// 1e-5), x = clamp(round(x s), -128, 127) / s with torch.round's ties to even, in f32. Row 0 has
// absmax 127 (s = 1), so its halves are exact ties; row 1 is zero (stays zero); row 2 is tiny
// (the 1e-5 floor); row 3 is random.
TEST(CpuOps, QuantizeRowsInt8FollowsBitNetsRule) {
  std::mt19937 rng(62);
  auto b = backend_at(test::simd_levels().back());
  auto x = make(*b, DType::f32, {4, 8});
  const std::vector<float> row0 = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.49f, -126.5f};
  std::copy(row0.begin(), row0.end(), x.tensor.as<float>());
  for (int64_t j = 0; j < 8; ++j) test::set(x.tensor, 8 + j, 0.0f);
  for (int64_t j = 0; j < 8; ++j) test::set(x.tensor, 16 + j, static_cast<float>(j) * 1e-7f);
  for (int64_t j = 0; j < 8; ++j) test::set(x.tensor, 24 + j, std::uniform_real_distribution<float>(-4, 4)(rng));
  const std::vector<float> before = test::to_vector(x.tensor);
  b->quantize_rows_int8(x.tensor);
  const std::vector<float> want0 = {127.0f, 2.0f, 4.0f, -2.0f, -0.0f, 0.0f, 1.0f, -126.0f};
  for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(get(x.tensor, j), want0[static_cast<size_t>(j)]) << j;
  for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(get(x.tensor, 8 + j), 0.0f);
  for (int64_t i = 2; i < 4; ++i) {
    float amax = 0.0f;
    for (int64_t j = 0; j < 8; ++j) amax = std::max(amax, std::fabs(before[static_cast<size_t>(i * 8 + j)]));
    const float s = 127.0f / std::max(amax, 1e-5f);
    for (int64_t j = 0; j < 8; ++j) {
      const float v = before[static_cast<size_t>(i * 8 + j)];
      EXPECT_EQ(get(x.tensor, i * 8 + j), std::clamp(std::nearbyint(v * s), -128.0f, 127.0f) / s) << i << " " << j;
    }
  }
  // Below the floor the row is not stretched to +-127: 7e-7 * 127 / 1e-5 = 8.89 rounds to 9.
  EXPECT_EQ(get(x.tensor, 16 + 7), 9.0f / (127.0f / 1e-5f));
}

// The query temperature: each q head of a row times log1p(floor((pos + offset) / floor)) * scale +
// 1, k and v untouched. Llama 4's offset 1: positions below floor - 1 keep 1, then a step at every
// multiple minus one; Ministral 3's offset 0: the steps at the multiples themselves.
TEST(CpuOps, AttentionTemperatureScalesQueriesByPosition) {
  std::mt19937 rng(56);
  auto b = backend_at(test::simd_levels().back());
  const QkvLayout l{4, 2, 8};
  const std::vector<int32_t> pos = {0, 2, 3, 4, 7, 8, 11, 8191, 8192, 100000};
  const int64_t n = static_cast<int64_t>(pos.size());
  for (const float offset : {1.0f, 0.0f}) {
    auto qkv = make(*b, DType::f32, {n, l.row_width()});
    auto positions = make(*b, DType::i32, {n});
    std::copy(pos.begin(), pos.end(), positions.tensor.as<int32_t>());
    test::fill_uniform(qkv.tensor, rng);
    const std::vector<float> before = test::to_vector(qkv.tensor);
    b->attention_temperature(qkv.tensor, l, positions.tensor, 4.0f, 0.1f, offset);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t p = pos[static_cast<size_t>(i)];
      const double t = std::log1p(std::floor((p + offset) / 4.0)) * 0.1 + 1.0;
      if (p == 3) {
        EXPECT_EQ(t == 1.0, offset == 0.0f) << "position 3 steps with offset 1 only";
      }
      if (p == 4) {
        EXPECT_GT(t, 1.0) << offset;
      }
      for (int64_t e = 0; e < l.row_width(); ++e) {
        const double x = before[static_cast<size_t>(i * l.row_width() + e)];
        EXPECT_NEAR(get(qkv.tensor, i * l.row_width() + e), e < l.q_width() ? x * t : x, 1e-6) << p << " " << offset;
      }
    }
  }
}

// OLMo 2: weights of the whole q and k widths normalise all of q's heads as one vector and all
// of k's as another (a double loop over the row's parts); v is left alone.
TEST(CpuOps, QkNormOverTheWholeWidth) {
  std::mt19937 rng(52);
  auto b = backend_at(test::simd_levels().back());
  const QkvLayout l{4, 2, 12};
  auto qkv = make(*b, DType::f32, {3, l.row_width()});
  auto qw = make(*b, DType::f32, {l.q_width()});
  auto kw = make(*b, DType::f32, {l.kv_width()});
  test::fill_uniform(qkv.tensor, rng);
  test::fill_uniform(qw.tensor, rng);
  test::fill_uniform(kw.tensor, rng);
  const std::vector<float> before = test::to_vector(qkv.tensor);
  b->qk_head_norm(qkv.tensor, l, qw.tensor, kw.tensor, 1e-6f);
  const struct { int64_t begin, width; const Tensor* w; } parts[] = {
      {0, l.q_width(), &qw.tensor}, {l.q_width(), l.kv_width(), &kw.tensor}, {l.q_width() + l.kv_width(), l.kv_width(), nullptr}};
  for (int64_t i = 0; i < 3; ++i) {
    for (const auto& p : parts) {
      const int64_t off = i * l.row_width() + p.begin;
      double ss = 0;
      for (int64_t e = 0; e < p.width; ++e) ss += double(before[static_cast<size_t>(off + e)]) * before[static_cast<size_t>(off + e)];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(p.width) + 1e-6);
      for (int64_t e = 0; e < p.width; ++e) {
        const double x = before[static_cast<size_t>(off + e)];
        EXPECT_NEAR(get(qkv.tensor, off + e), p.w ? x * inv * get(*p.w, e) : x, 1e-5) << p.begin;
      }
    }
  }
}

// The same norms split over two tensor-parallel ranks (each with half the q and k heads):
// qk_sum_squares per rank, the sums added (the all-reduce), qk_norm_by_sums with each rank's
// weight slices give every rank's heads what qk_head_norm gives the whole rows.
TEST(CpuOps, QkNormOverTheWholeWidthSplitOverRanks) {
  std::mt19937 rng(58);
  auto b = backend_at(test::simd_levels().back());
  const QkvLayout whole{4, 2, 12}, half{2, 1, 12};
  const int64_t n = 5;
  auto qkv = make(*b, DType::f32, {n, whole.row_width()});
  auto qw = make(*b, DType::f32, {whole.q_width()});
  auto kw = make(*b, DType::f32, {whole.kv_width()});
  test::fill_uniform(qkv.tensor, rng);
  test::fill_uniform(qw.tensor, rng);
  test::fill_uniform(kw.tensor, rng);
  const std::vector<float> x = test::to_vector(qkv.tensor);
  // Rank r's rows: its q heads, its k head, its v head.
  std::vector<OwnedTensor> ranks, qws, kws, sums;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(make(*b, DType::f32, {n, half.row_width()}));
    qws.push_back(make(*b, DType::f32, {half.q_width()}));
    kws.push_back(make(*b, DType::f32, {half.kv_width()}));
    sums.push_back(make(*b, DType::f32, {n, 2}));
    for (int64_t i = 0; i < n; ++i) {
      float* row = ranks[r].tensor.as<float>() + i * half.row_width();
      const float* src = x.data() + i * whole.row_width();
      std::copy_n(src + r * half.q_width(), half.q_width(), row);
      std::copy_n(src + whole.q_width() + r * half.kv_width(), half.kv_width(), row + half.q_width());
      std::copy_n(src + whole.q_width() + whole.kv_width() + r * half.kv_width(), half.kv_width(),
                  row + half.q_width() + half.kv_width());
    }
    std::copy_n(qw.tensor.as<float>() + r * half.q_width(), half.q_width(), qws[r].tensor.as<float>());
    std::copy_n(kw.tensor.as<float>() + r * half.kv_width(), half.kv_width(), kws[r].tensor.as<float>());
    b->qk_sum_squares(ranks[r].tensor, half, sums[r].tensor);
  }
  for (int64_t j = 0; j < 2 * n; ++j) {  // the all-reduce
    const float total = sums[0].tensor.as<float>()[j] + sums[1].tensor.as<float>()[j];
    sums[0].tensor.as<float>()[j] = sums[1].tensor.as<float>()[j] = total;
  }
  b->qk_head_norm(qkv.tensor, whole, qw.tensor, kw.tensor, 1e-6f);
  for (int r = 0; r < 2; ++r) {
    b->qk_norm_by_sums(ranks[r].tensor, half, sums[r].tensor, whole.q_width(), whole.kv_width(), qws[r].tensor,
                       kws[r].tensor, 1e-6f);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = ranks[r].tensor.as<float>() + i * half.row_width();
      const float* want = qkv.tensor.as<float>() + i * whole.row_width();
      for (int64_t e = 0; e < half.q_width(); ++e) EXPECT_NEAR(row[e], want[r * half.q_width() + e], 1e-5);
      for (int64_t e = 0; e < half.kv_width(); ++e)
        EXPECT_NEAR(row[half.q_width() + e], want[whole.q_width() + r * half.kv_width() + e], 1e-5);
      for (int64_t e = 0; e < half.kv_width(); ++e)  // v as it was
        EXPECT_EQ(row[half.q_width() + half.kv_width() + e], want[whole.q_width() + whole.kv_width() + r * half.kv_width() + e]);
    }
  }
}

// llama2.c run.c RoPE for one head: interleaved pairs, f32 angles.
void llama2c_rope(float* v, int head_size, int pos) {
  for (int i = 0; i < head_size; i += 2) {
    const float freq = 1.0f / powf(10000.0f, static_cast<float>(i) / static_cast<float>(head_size));
    const float val = static_cast<float>(pos) * freq;
    const float fcr = cosf(val), fci = sinf(val);
    const float v0 = v[i], v1 = v[i + 1];
    v[i] = v0 * fcr - v1 * fci;
    v[i + 1] = v0 * fci + v1 * fcr;
  }
}

RopeConfig llama_rope(int rotary_dim, int head_dim, RopeStyle style) {
  RopeConfig c;
  c.style = style;
  c.rotary_dim = rotary_dim;
  for (int i = 0; i < rotary_dim; i += 2)
    c.inv_freq.push_back(1.0f / powf(10000.0f, static_cast<float>(i) / static_cast<float>(head_dim)));
  return c;
}

TEST(CpuOps, InterleavedRopeMatchesLlama2c) {
  std::mt19937 rng(6);
  auto b = backend_at(test::simd_levels().back());
  const QkvLayout l{8, 4, 6};  // stories260K: dim 64, 8 heads, 4 kv heads
  auto qkv = make(*b, DType::f32, {4, l.row_width()});
  auto pos = make(*b, DType::i32, {4});
  const int32_t pos_values[4] = {0, 1, 17, 511};
  std::copy_n(pos_values, 4, pos.tensor.as<int32_t>());
  test::fill_uniform(qkv.tensor, rng);
  std::vector<float> ref = test::to_vector(qkv.tensor);
  b->rope(qkv.tensor, l, pos.tensor, llama_rope(6, 6, RopeStyle::interleaved));
  for (int64_t i = 0; i < 4; ++i) {
    for (int h = 0; h < l.n_heads + 2 * l.n_kv_heads; ++h) {
      float* v = ref.data() + i * l.row_width() + h * 6;
      if (h < l.n_heads + l.n_kv_heads) llama2c_rope(v, 6, pos_values[i]);  // V untouched
      for (int e = 0; e < 6; ++e) ASSERT_EQ(qkv.tensor.as<float>()[i * l.row_width() + h * 6 + e], v[e]);
    }
  }
}

TEST(CpuOps, NeoxRopePartialWithAttentionFactor) {
  std::mt19937 rng(7);
  auto b = backend_at(test::simd_levels().back());
  const QkvLayout l{2, 1, 16};
  const int rot = 10;
  auto qkv = make(*b, DType::f32, {3, l.row_width()});
  auto pos = make(*b, DType::i32, {3});
  const int32_t pos_values[3] = {5, 0, 1000};
  std::copy_n(pos_values, 3, pos.tensor.as<int32_t>());
  test::fill_uniform(qkv.tensor, rng);
  const std::vector<float> before = test::to_vector(qkv.tensor);
  RopeConfig cfg = llama_rope(rot, 16, RopeStyle::neox);
  cfg.attention_factor = 1.25f;
  b->rope(qkv.tensor, l, pos.tensor, cfg);
  for (int64_t i = 0; i < 3; ++i)
    for (int h = 0; h < 4; ++h) {
      const int64_t off = i * l.row_width() + h * 16;
      for (int e = 0; e < 16; ++e) {
        double want = before[static_cast<size_t>(off + e)];
        if (h < 3 && e < rot) {
          const int f = e % (rot / 2);
          const double ang = static_cast<double>(pos_values[i]) * cfg.inv_freq[static_cast<size_t>(f)];
          const double c = std::cos(ang) * 1.25, s = std::sin(ang) * 1.25;
          const double x0 = before[static_cast<size_t>(off + f)], x1 = before[static_cast<size_t>(off + f + rot / 2)];
          want = e < rot / 2 ? x0 * c - x1 * s : x0 * s + x1 * c;
        }
        // f32 angles at pos 1000 carry ~1e-4 rad of rounding, as in HF's f32 computation.
        EXPECT_NEAR(get(qkv.tensor, off + e), want, pos_values[i] >= 1000 ? 5e-4 : 1e-5) << i << " " << h << " " << e;
      }
    }
}

// M-RoPE (RopeConfig::sections): frequency pair f rotates by the plane its section names; with
// every plane equal it is the one-position rotation, bit for bit.
// Qwen2-VL's sections (contiguous) and Qwen3-VL's interleaved ones.
class SectionedRope : public ::testing::TestWithParam<bool> {};

TEST_P(SectionedRope, TakesEachPairsPositionFromItsPlane) {
  std::mt19937 rng(8);
  auto b = backend_at(test::simd_levels().back());
  const QkvLayout l{2, 1, 16};
  const int n = 3;
  auto qkv = make(*b, DType::f32, {n, l.row_width()});
  test::fill_uniform(qkv.tensor, rng);
  const std::vector<float> before = test::to_vector(qkv.tensor);
  RopeConfig cfg = llama_rope(16, 16, RopeStyle::neox);
  cfg.sections = {2, 3, 3};
  cfg.interleaved = GetParam();
  const int32_t planes[3][n] = {{4, 4, 9}, {4, 6, 9}, {4, 2, 12}};
  auto pos = make(*b, DType::i32, {3 * n});
  for (int k = 0; k < 3; ++k) std::copy_n(planes[k], n, pos.tensor.as<int32_t>() + k * n);
  b->rope(qkv.tensor, l, pos.tensor, cfg);
  // Contiguous: pairs 0-1 plane 0, 2-4 plane 1, 5-7 plane 2. Interleaved (transformers'
  // recomposition_frequencies): plane 1 at 1, 4, 7 (< 3 * 3), plane 2 at 2, 5 (< 9; pair 8 is
  // past the head), plane 0 elsewhere.
  const int contiguous[8] = {0, 0, 1, 1, 1, 2, 2, 2}, interleaved[8] = {0, 1, 2, 0, 1, 2, 0, 1};
  const int* plane_of = GetParam() ? interleaved : contiguous;
  for (int64_t i = 0; i < n; ++i)
    for (int h = 0; h < 4; ++h) {
      const int64_t off = i * l.row_width() + h * 16;
      for (int e = 0; e < 16; ++e) {
        double want = before[static_cast<size_t>(off + e)];
        if (h < 3) {
          const int f = e % 8;
          const double ang = static_cast<double>(planes[plane_of[f]][i]) * cfg.inv_freq[static_cast<size_t>(f)];
          const double x0 = before[static_cast<size_t>(off + f)], x1 = before[static_cast<size_t>(off + f + 8)];
          want = e < 8 ? x0 * std::cos(ang) - x1 * std::sin(ang) : x0 * std::sin(ang) + x1 * std::cos(ang);
        }
        EXPECT_NEAR(get(qkv.tensor, off + e), want, 1e-5) << i << " " << h << " " << e;
      }
    }
  // Row 0's planes are all 4: exactly the plain rotation at position 4.
  auto plain = make(*b, DType::f32, {1, l.row_width()});
  std::copy_n(before.begin(), l.row_width(), plain.tensor.as<float>());
  auto four = make(*b, DType::i32, {1});
  four.tensor.as<int32_t>()[0] = 4;
  cfg.sections.clear();
  b->rope(plain.tensor, l, four.tensor, cfg);
  for (int e = 0; e < l.row_width(); ++e) ASSERT_EQ(get(plain.tensor, e), get(qkv.tensor, e)) << e;
}

INSTANTIATE_TEST_SUITE_P(CpuOps, SectionedRope, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Interleaved" : "Contiguous"; });

TEST(CpuOps, GatherRows) {
  auto b = backend_at(test::simd_levels().back());
  auto x = make(*b, DType::f32, {5, 3});
  for (int i = 0; i < 15; ++i) x.tensor.as<float>()[i] = static_cast<float>(i);
  auto rows = make(*b, DType::i32, {3});
  const int32_t r[3] = {4, 0, 4};
  std::copy_n(r, 3, rows.tensor.as<int32_t>());
  auto out = make(*b, DType::f32, {3, 3});
  b->gather_rows(x.tensor, rows.tensor, out.tensor);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(out.tensor.as<float>()[i * 3 + j], static_cast<float>(r[i] * 3 + j));
}

TEST(CpuOps, AllocateAlignsAndCopies) {
  auto b = backend_at(test::simd_levels().back());
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{1} << 20}) {
    auto buf = b->allocate(bytes);
    ASSERT_TRUE(buf.has_value());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % 64, 0u);
  }
  auto huge = b->allocate(size_t{1} << 62);
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.status().code(), StatusCode::out_of_resources);
  auto t = make(*b, DType::f32, {4});
  const float src[4] = {1, 2, 3, 4};
  float dst[4] = {};
  b->upload(t.tensor, src);
  b->download(dst, t.tensor);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(dst[i], src[i]);
}

TEST(CpuOps, PrepareWeightConvertsAndKeeps) {
  std::mt19937 rng(8);
  auto b = backend_at(test::simd_levels().back());
  auto host = make(*b, DType::f32, {3, 4097});
  test::fill_uniform(host.tensor, rng, -100, 100);
  auto kept = b->prepare_weight(host.tensor, std::nullopt);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->tensor.dtype, DType::f32);
  EXPECT_NE(kept->tensor.data, host.tensor.data);
  for (DType t : {DType::bf16, DType::f16}) {
    auto conv = b->prepare_weight(host.tensor, t);
    ASSERT_TRUE(conv.has_value());
    for (int64_t i = 0; i < host.tensor.numel(); ++i) {
      const float v = host.tensor.as<float>()[i];
      const uint16_t want = t == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
      ASSERT_EQ(conv->tensor.as<uint16_t>()[i], want) << i;
    }
    auto back = b->prepare_weight(conv->tensor, DType::f32);  // widening is exact
    ASSERT_TRUE(back.has_value());
    for (int64_t i = 0; i < host.tensor.numel(); ++i) ASSERT_EQ(get(back->tensor, i), get(conv->tensor, i));
  }
  auto ints = make(*b, DType::i32, {4});
  EXPECT_EQ(b->prepare_weight(ints.tensor, DType::f32).status().code(), StatusCode::unsupported);
}

// The device path's token ops (actors/executor/step_runner.h): plain loops on the CPU.
TEST(CpuOps, GatherAndScatterTokensSkipNegativeIndices) {
  auto b = make_cpu_backend({1});
  auto table = make(*b, DType::i32, {6});
  auto tokens = make(*b, DType::i32, {4});
  auto index = make(*b, DType::i32, {4});
  const std::vector<int32_t> t0 = {10, 11, 12, 13, 14, 15}, k0 = {7, 8, 9, 6}, idx = {5, -1, 0, -1};
  b->upload(table.tensor, t0.data());
  b->upload(tokens.tensor, k0.data());
  b->upload(index.tensor, idx.data());
  b->gather_tokens(table.tensor, index.tensor, tokens.tensor);
  EXPECT_EQ(std::vector<int32_t>(tokens.tensor.as<int32_t>(), tokens.tensor.as<int32_t>() + 4),
            (std::vector<int32_t>{15, 8, 10, 6}));
  const std::vector<int32_t> k1 = {1, 2, 3, 4}, idx1 = {-1, 4, -1, 1};
  b->upload(tokens.tensor, k1.data());
  b->upload(index.tensor, idx1.data());
  b->scatter_tokens(tokens.tensor, index.tensor, table.tensor);
  EXPECT_EQ(std::vector<int32_t>(table.tensor.as<int32_t>(), table.tensor.as<int32_t>() + 6),
            (std::vector<int32_t>{10, 4, 12, 13, 2, 15}));
}

TEST(CpuOps, ArgmaxAndSampleRowsFollowTheDeviceRule) {
  auto b = make_cpu_backend({2});
  const int64_t n = 5, vocab = 300;
  std::mt19937 rng(3);
  auto logits = make(*b, DType::f32, {n, vocab});
  test::fill_uniform(logits.tensor, rng, -4, 4);
  auto tokens = make(*b, DType::i32, {n});
  b->argmax(logits.tensor, tokens.tensor);
  std::vector<SampleParams> params(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    std::span<const float> row(logits.tensor.as<float>() + r * vocab, static_cast<size_t>(vocab));
    EXPECT_EQ(tokens.tensor.as<int32_t>()[r], argmax(row)) << "row " << r;
    // Row 0 greedy; rows 1-4 top-k 10..40 and top-p 0.95; rows 3 and 4 also min-p 0.05.
    const float log_min_p = r >= 3 ? std::log(0.05f) : -INFINITY;
    params[static_cast<size_t>(r)] = {r == 0 ? 0.0f : 0.9f, static_cast<int32_t>(r * 10), 0.95f, log_min_p,
                                      100 + static_cast<uint64_t>(r), 7};
  }
  auto pbuf = b->allocate(params.size() * sizeof(SampleParams));
  ASSERT_TRUE(pbuf.has_value());
  const Tensor pt(pbuf->data(), DType::u8, {static_cast<int64_t>(params.size() * sizeof(SampleParams))});
  b->upload(pt, params.data());
  b->sample(logits.tensor, pt, tokens.tensor);
  for (int64_t r = 0; r < n; ++r) {
    std::span<const float> row(logits.tensor.as<float>() + r * vocab, static_cast<size_t>(vocab));
    EXPECT_EQ(tokens.tensor.as<int32_t>()[r], sample_like_device(row, params[static_cast<size_t>(r)])) << "row " << r;
  }
}

// The exact GELU (torch's nn.GELU(), BERT's "gelu") at every SIMD level against erf in double,
// over the range activations take and past it, with a length that leaves a scalar tail.
TEST(CpuGelu, EveryLevelFollowsErfWithinAFewUlps) {
  std::vector<float> xs;
  for (int i = -4000; i <= 4000; ++i) xs.push_back(static_cast<float>(i) * 0.0025f);  // [-10, 10]
  for (float v : {-30.0f, -12.5f, 12.5f, 30.0f, 1e-30f, -1e-30f, 0.0f, -0.0f}) xs.push_back(v);
  for (size_t li = 0; li < test::simd_levels().size(); ++li) {
    const cpu::Kernels& kn = cpu::kernels_for(static_cast<cpu::SimdLevel>(li));
    std::vector<float> y = xs;
    kn.gelu_erf(y.data(), static_cast<int64_t>(y.size()));
    double worst = 0.0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x = xs[i], want = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
      const double err = std::abs(y[i] - want) / std::max(1.0, std::abs(want));
      worst = std::max(worst, err);
      ASSERT_LE(err, 4e-7) << test::simd_levels()[li] << " x " << x << ": " << y[i] << " vs " << want;
    }
    std::printf("%s: worst relative error %.3g\n", test::simd_levels()[li].c_str(), worst);
  }
}

// torch's tanh GELU (gelu_pytorch_tanh: SigLIP's MLP, Gemma's GeGLU) at every SIMD level against
// the formula in double, in place and gated, over the range activations take and past it (x^3
// overflowing included), with a length that leaves a scalar tail.
TEST(CpuGeluTanh, EveryLevelFollowsTanhWithinAFewUlps) {
  std::vector<float> xs;
  for (int i = -4000; i <= 4000; ++i) xs.push_back(static_cast<float>(i) * 0.0025f);  // [-10, 10]
  for (float v : {-1e20f, -30.0f, -12.5f, 12.5f, 30.0f, 1e20f, 1e-30f, -1e-30f, 0.0f, -0.0f}) xs.push_back(v);
  std::vector<float> up(xs.size());
  for (size_t i = 0; i < up.size(); ++i) up[i] = 0.5f + static_cast<float>(i % 7) * 0.25f;
  for (size_t li = 0; li < test::simd_levels().size(); ++li) {
    const cpu::Kernels& kn = cpu::kernels_for(static_cast<cpu::SimdLevel>(li));
    std::vector<float> y = xs, gated(xs.size());
    kn.gelu_tanh(y.data(), static_cast<int64_t>(y.size()));
    kn.gelu_tanh_mul(xs.data(), up.data(), gated.data(), static_cast<int64_t>(xs.size()));
    double worst = 0.0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x = xs[i], u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
      const double want = std::isfinite(u) ? 0.5 * x * (1.0 + std::tanh(u)) : (x > 0 ? x : 0.0);
      const double err = std::abs(y[i] - want) / std::max(1.0, std::abs(want));
      worst = std::max(worst, err);
      ASSERT_LE(err, 4e-7) << test::simd_levels()[li] << " x " << x << ": " << y[i] << " vs " << want;
      const double gated_want = want * up[i];
      ASSERT_LE(std::abs(gated[i] - gated_want) / std::max(1.0, std::abs(gated_want)), 1e-6)
          << test::simd_levels()[li] << " gated, x " << x;
    }
    std::printf("%s: worst relative error %.3g\n", test::simd_levels()[li].c_str(), worst);
  }
}

// Mamba1's scan step over a block of channels (Kernels::ssm_diag_rows) at every SIMD level
// against double: decays from 1 down to underflow (dt a from 0 to -130), state widths with and
// without a scalar tail.
TEST(CpuSsmDiagRows, EveryLevelFollowsDoubleWithinAFewUlps) {
  for (int64_t n : {16, 19}) {
    constexpr int64_t kChannels = 5;
    std::vector<float> a(static_cast<size_t>(kChannels * n)), s0(a.size()), b(static_cast<size_t>(n)),
        c(static_cast<size_t>(n));
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = -0.1f * static_cast<float>(i % 37) * static_cast<float>(i % 37) / 3.0f;  // 0 .. -43
      s0[i] = std::cos(1.3f * static_cast<float>(i)) * 5.0f;
    }
    for (size_t j = 0; j < b.size(); ++j) {
      b[j] = std::sin(0.7f * static_cast<float>(j)) * 3.0f;
      c[j] = std::cos(0.4f * static_cast<float>(j)) - 0.2f;
    }
    const std::vector<float> dt = {0.0f, 0.01f, 0.5f, 2.7f, 3.0f}, x = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f};
    for (size_t li = 0; li < test::simd_levels().size(); ++li) {
      const cpu::Kernels& kn = cpu::kernels_for(static_cast<cpu::SimdLevel>(li));
      std::vector<float> st = s0, y(kChannels);
      kn.ssm_diag_rows(st.data(), a.data(), dt.data(), x.data(), b.data(), c.data(), kChannels, n, y.data());
      for (int64_t d = 0; d < kChannels; ++d) {
        double dot = 0.0, scale = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const size_t k = static_cast<size_t>(d * n + j);
          const double want = std::exp(static_cast<double>(dt[static_cast<size_t>(d)]) * a[k]) * s0[k] +
                              static_cast<double>(dt[static_cast<size_t>(d)]) * x[static_cast<size_t>(d)] * b[static_cast<size_t>(j)];
          ASSERT_NEAR(st[k], want, 4e-7 * std::max(1.0, std::abs(want))) << test::simd_levels()[li] << " d " << d << " j " << j;
          dot += want * c[static_cast<size_t>(j)];
          scale += std::abs(want * c[static_cast<size_t>(j)]);
        }
        EXPECT_NEAR(y[static_cast<size_t>(d)], dot, 1e-6 * std::max(1.0, scale)) << test::simd_levels()[li] << " d " << d;
      }
    }
  }
}

// Gated DeltaNet (Backend::gated_delta) against the rule in double, as transformers'
// torch_recurrent_gated_delta_rule states it (S [N, P] per value head, kept [P, N] by the op):
// a fresh sequence, one continuing the state in its slot with a snapshot after its second row,
// at every SIMD level; the results do not depend on the thread count. tiled: value head h reads
// key head h % G (SsmLayout::tiled_heads, llama.cpp's GGUF order), else h / (H / G).
void expect_gated_delta_follows_the_rule(bool tiled) {
  const SsmLayout l{.n_heads = 4, .head_dim = 8, .n_groups = 2, .state_size = 16, .conv_kernel = 4, .tiled_heads = tiled};
  const int64_t H = l.n_heads, P = l.head_dim, G = l.n_groups, N = l.state_size, ch = l.conv_dim();
  const int64_t n = 8, z_col = ch, width = ch + H * P + 2 * H, slots = 3;
  const std::vector<int32_t> q_start = {0, 5, 8}, seq_slots = {1, 2}, fresh = {1, 0}, save_rows = {0, 2},
                             save_slots = {-1, 0};
  std::mt19937 rng(11);
  std::vector<float> qkv(static_cast<size_t>(n * ch)), proj(static_cast<size_t>(n * width)), a(H), dt_bias(H), w(P),
      state0(static_cast<size_t>(slots * H * P * N));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto* v : {&qkv, &proj, &dt_bias, &state0}) for (float& x : *v) x = u(rng);
  for (float& x : a) x = -std::exp(u(rng));  // -exp(A_log)
  for (float& x : w) x = 1.0f + 0.1f * u(rng);
  const float eps = 1e-6f;
  // The reference: per sequence and value head, S [N][P] from the slot's state (transposed) or zeros.
  std::vector<double> want(static_cast<size_t>(n * H * P)), want_save(static_cast<size_t>(H * P * N));
  std::vector<double> want_state(static_cast<size_t>(slots * H * P * N));
  for (size_t i = 0; i < state0.size(); ++i) want_state[i] = state0[i];
  for (int s = 0; s < 2; ++s) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = tiled ? h % G : h / (H / G);
      double S[16][8];
      double* st = want_state.data() + (seq_slots[static_cast<size_t>(s)] * H + h) * P * N;
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < P; ++j) S[i][j] = fresh[static_cast<size_t>(s)] ? 0.0 : st[j * N + i];
      for (int64_t r = q_start[static_cast<size_t>(s)]; r < q_start[static_cast<size_t>(s) + 1]; ++r) {
        const float* x = qkv.data() + r * ch;
        const float* zba = proj.data() + r * width + z_col;
        double q[16], k[16], qq = 0, kk = 0;
        for (int64_t i = 0; i < N; ++i) {
          q[i] = x[g * N + i], k[i] = x[G * N + g * N + i];
          qq += q[i] * q[i], kk += k[i] * k[i];
        }
        for (int64_t i = 0; i < N; ++i) q[i] = q[i] / std::sqrt(qq + 1e-6) / std::sqrt(double(N)), k[i] /= std::sqrt(kk + 1e-6);
        const double beta = 1.0 / (1.0 + std::exp(-double(zba[H * P + h])));
        const double sp = std::log1p(std::exp(double(zba[H * P + H + h]) + dt_bias[static_cast<size_t>(h)]));
        const double decay = std::exp(a[static_cast<size_t>(h)] * sp);
        double o[8], sq = 0;
        for (int64_t j = 0; j < P; ++j) {
          double kv_mem = 0;
          for (int64_t i = 0; i < N; ++i) kv_mem += decay * S[i][j] * k[i];
          const double delta = (x[2 * G * N + h * P + j] - kv_mem) * beta;
          o[j] = 0;
          for (int64_t i = 0; i < N; ++i) {
            S[i][j] = decay * S[i][j] + k[i] * delta;
            o[j] += S[i][j] * q[i];
          }
          sq += o[j] * o[j];
        }
        for (int64_t j = 0; j < P; ++j) {
          const double z = zba[h * P + j];
          want[static_cast<size_t>((r * H + h) * P + j)] = o[j] / std::sqrt(sq / double(P) + eps) * w[static_cast<size_t>(j)] * z / (1.0 + std::exp(-z));
        }
        if (s == 1 && r == q_start[1] + 1)
          for (int64_t i = 0; i < N; ++i)
            for (int64_t j = 0; j < P; ++j) want_save[static_cast<size_t>((h * P + j) * N + i)] = S[i][j];
      }
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < P; ++j) st[j * N + i] = S[i][j];
    }
  }
  std::vector<float> first_out;
  for (const std::string& level : test::simd_levels()) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(level + ", " + std::to_string(threads) + " threads");
      auto b = test::backend_at(level, threads);
      auto t_qkv = test::make(*b, DType::f32, {n, ch});
      auto t_proj = test::make(*b, DType::f32, {n, width});
      auto t_a = test::make(*b, DType::f32, {H});
      auto t_dt = test::make(*b, DType::f32, {H});
      auto t_w = test::make(*b, DType::f32, {P});
      auto t_state = test::make(*b, DType::f32, {slots, H * P * N});
      auto t_out = test::make(*b, DType::f32, {n, H * P});
      auto i32 = [&](const std::vector<int32_t>& v) {
        auto t = test::make(*b, DType::i32, {static_cast<int64_t>(v.size())});
        b->upload(t.tensor, v.data());
        return t;
      };
      auto t_q = i32(q_start), t_slots = i32(seq_slots), t_fresh = i32(fresh), t_rows = i32(save_rows), t_to = i32(save_slots);
      b->upload(t_qkv.tensor, qkv.data());
      b->upload(t_proj.tensor, proj.data());
      b->upload(t_a.tensor, a.data());
      b->upload(t_dt.tensor, dt_bias.data());
      b->upload(t_w.tensor, w.data());
      b->upload(t_state.tensor, state0.data());
      const SsmSeqs seqs{t_q.tensor, t_slots.tensor, t_fresh.tensor, 2, t_rows.tensor, t_to.tensor};
      const SsmParams p{t_a.tensor, Tensor(), t_dt.tensor, 0.0f, 0.0f, t_w.tensor, eps};
      b->gated_delta(t_qkv.tensor, t_proj.tensor, z_col, l, p, seqs, t_state.tensor, t_out.tensor);
      const float* out = t_out.tensor.as<float>();
      const float* st = t_state.tensor.as<float>();
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-4 * (1.0 + std::fabs(want[i]))) << "out " << i;
      for (int slot : {1, 2})
        for (int64_t i = 0; i < H * P * N; ++i)
          ASSERT_NEAR(st[slot * H * P * N + i], want_state[static_cast<size_t>(slot * H * P * N + i)], 1e-4) << "slot " << slot;
      for (int64_t i = 0; i < H * P * N; ++i) ASSERT_NEAR(st[i], want_save[static_cast<size_t>(i)], 1e-4) << "snapshot " << i;
      if (threads == 1) first_out.assign(out, out + n * H * P);
      else EXPECT_EQ(std::vector<float>(out, out + n * H * P), first_out) << "the thread count changed the result";
    }
  }
}

TEST(CpuGatedDelta, FollowsTheRuleInDoubleAtEveryLevel) { expect_gated_delta_follows_the_rule(false); }
TEST(CpuGatedDelta, TiledHeadsFollowTheRuleInDouble) { expect_gated_delta_follows_the_rule(true); }

// LFM2's short convolution (Backend::short_conv): out = C * conv(B * x) over each sequence's rows,
// continuing its slot's last K - 1 products (zeros when fresh), which the slot then holds; a
// snapshot after a row; against a double loop. 70 channels: a block of 64 and a partial one.
TEST(CpuShortConv, FollowsADoubleLoopWithStatesAndSnapshots) {
  const int64_t ch = 70, k = 3, keep = k - 1, n = 9, slots = 3;
  const std::vector<int32_t> q_start = {0, 6, 9}, seq_slots = {2, 1}, fresh = {1, 0}, save_rows = {4, 0},
                             save_slots = {0, -1};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> in(static_cast<size_t>(n * 3 * ch)), w(static_cast<size_t>(ch * k)), bias(static_cast<size_t>(ch)),
      state0(static_cast<size_t>(slots * keep * ch));
  for (auto* v : {&in, &w, &bias, &state0}) for (float& x : *v) x = u(rng);
  for (const bool with_bias : {false, true}) {
    // The reference: each sequence's window of the last k products, oldest first.
    std::vector<double> want(static_cast<size_t>(n * ch)), want_state(state0.begin(), state0.end()), want_save(static_cast<size_t>(keep * ch));
    for (int s = 0; s < 2; ++s) {
      double* st = want_state.data() + seq_slots[static_cast<size_t>(s)] * keep * ch;
      for (int64_t c = 0; c < ch; ++c) {
        std::vector<double> window(static_cast<size_t>(keep));
        for (int64_t j = 0; j < keep; ++j) window[static_cast<size_t>(j)] = fresh[static_cast<size_t>(s)] ? 0.0 : st[j * ch + c];
        for (int64_t r = q_start[static_cast<size_t>(s)]; r < q_start[static_cast<size_t>(s) + 1]; ++r) {
          const float* row = in.data() + r * 3 * ch;
          window.push_back(double(row[c]) * row[2 * ch + c]);  // B * x
          double acc = with_bias ? bias[static_cast<size_t>(c)] : 0.0;
          for (int64_t j = 0; j < k; ++j) acc += double(w[static_cast<size_t>(c * k + j)]) * window[window.size() - k + j];
          want[static_cast<size_t>(r * ch + c)] = double(row[ch + c]) * acc;  // C * conv
          if (s == 0 && r == save_rows[0] - 1)
            for (int64_t j = 0; j < keep; ++j) want_save[static_cast<size_t>(j * ch + c)] = window[window.size() - keep + j];
        }
        for (int64_t j = 0; j < keep; ++j) st[j * ch + c] = window[window.size() - keep + j];
      }
    }
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::string(with_bias ? "bias, " : "no bias, ") + std::to_string(threads) + " threads");
      auto b = test::backend_at(test::simd_levels().front(), threads);
      auto t_in = test::make(*b, DType::f32, {n, 3 * ch});
      auto t_w = test::make(*b, DType::f32, {ch, k});
      auto t_b = test::make(*b, DType::f32, {ch});
      auto t_state = test::make(*b, DType::f32, {slots, keep * ch});
      auto t_out = test::make(*b, DType::f32, {n, ch});
      auto i32 = [&](const std::vector<int32_t>& v) {
        auto t = test::make(*b, DType::i32, {static_cast<int64_t>(v.size())});
        b->upload(t.tensor, v.data());
        return t;
      };
      auto t_q = i32(q_start), t_slots = i32(seq_slots), t_fresh = i32(fresh), t_rows = i32(save_rows), t_to = i32(save_slots);
      b->upload(t_in.tensor, in.data());
      b->upload(t_w.tensor, w.data());
      b->upload(t_b.tensor, bias.data());
      b->upload(t_state.tensor, state0.data());
      const SsmSeqs seqs{t_q.tensor, t_slots.tensor, t_fresh.tensor, 2, t_rows.tensor, t_to.tensor};
      b->short_conv(t_in.tensor, t_w.tensor, with_bias ? t_b.tensor : Tensor(), seqs, t_state.tensor, t_out.tensor);
      const float* out = t_out.tensor.as<float>();
      const float* st = t_state.tensor.as<float>();
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << "out " << i;
      for (int slot : {1, 2})
        for (int64_t i = 0; i < keep * ch; ++i)
          ASSERT_NEAR(st[slot * keep * ch + i], want_state[static_cast<size_t>(slot * keep * ch + i)], 1e-5) << "slot " << slot;
      for (int64_t i = 0; i < keep * ch; ++i) ASSERT_NEAR(st[i], want_save[static_cast<size_t>(i)], 1e-5) << "snapshot " << i;
    }
  }
}

}  // namespace
}  // namespace brigade
