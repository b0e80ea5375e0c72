// matmul and embedding with block-quantized weights (core/quant.h), every SIMD level runnable here.
//
// The reference is the weight dequantized by quant::dequantize_row (itself checked against
// llama.cpp's gguf-py in tests/core) times the f32 activations, in double. The kernels quantize
// each block of 32 activations to int8 with d = absmax / 127 (round to nearest), which moves an
// activation by at most d / 2, so |out - ref| <= sum_j |w_j| * d(j) / 2 (+ float rounding): the
// bound the tests allow, computed per output. A wrong nibble, scale or offset breaks it by far.
#include <cmath>
#include <cstring>
#include <random>

#include "core/quant.h"
#include "cpu/ops.h"
#include "tests/cpu/cpu_test_util.h"

namespace brigade {
namespace {

using test::backend_at;
using test::make;

using test::dequantized;
using test::random_weight;

struct QCase {
  DType t;
  int64_t n, m, k;
};

class QuantMatmul : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantMatmul, MatchesTheDequantizedWeightWithinTheActivationRounding) {
  auto b = backend_at(GetParam());
  std::mt19937 rng(7);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q4_k, DType::q5_k, DType::q6_k, DType::mxfp4}) {
    const int64_t kb = dtype_block_elems(t);
    for (const QCase& c : {QCase{t, 1, 37, 2 * kb}, QCase{t, 3, 8, 3 * kb}, QCase{t, 5, 64, kb}, QCase{t, 8, 21, 4 * kb},
                           QCase{t, 33, 16, 2 * kb}, QCase{t, 64, 70, 2 * kb},
                           QCase{t, 50, 9, 3 * kb}, QCase{t, 48, 8, kb}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " n=" + std::to_string(c.n) + " m=" + std::to_string(c.m) +
                   " k=" + std::to_string(c.k));
      auto wbytes = random_weight(t, c.m, c.k, rng);
      const Tensor w_host(wbytes.data(), t, {c.m, c.k});
      auto w = b->prepare_weight(w_host, std::nullopt);
      ASSERT_TRUE(w.has_value()) << w.status().message();
      ASSERT_EQ(w->tensor.dtype, t);
      auto x = make(*b, DType::f32, {c.n, c.k});
      test::fill_uniform(x.tensor, rng);
      auto bias = make(*b, DType::f32, {c.m});
      test::fill_uniform(bias.tensor, rng);
      auto out = make(*b, DType::f32, {c.n, c.m});
      b->matmul(x.tensor, w->tensor, bias.tensor, out.tensor);
      const auto wf = dequantized(wbytes, t, c.m, c.k);
      const float* xp = x.tensor.as<float>();
      for (int64_t i = 0; i < c.n; ++i) {
        // d / 2 of each activation's block: of 32, or of 256 where a K-quant decode reads q8_K.
        const int64_t ab = cpu::decodes_with_q8k(t) && c.n < cpu::kQuantGemmMinRows ? 256 : 32;
        std::vector<double> half_step(static_cast<size_t>(c.k));
        for (int64_t blk = 0; blk < c.k / ab; ++blk) {
          float amax = 0.0f;
          for (int64_t j = 0; j < ab; ++j) amax = std::max(amax, std::fabs(xp[i * c.k + blk * ab + j]));
          for (int64_t j = 0; j < ab; ++j) half_step[static_cast<size_t>(blk * ab + j)] = amax / 127.0 / 2.0;
        }
        for (int64_t r = 0; r < c.m; ++r) {
          double ref = bias.tensor.as<float>()[r], bound = 0.0, mag = std::fabs(ref);
          for (int64_t j = 0; j < c.k; ++j) {
            const double wv = wf[static_cast<size_t>(r * c.k + j)];
            ref += wv * xp[i * c.k + j];
            bound += std::fabs(wv) * half_step[static_cast<size_t>(j)];
            mag += std::fabs(wv * xp[i * c.k + j]);
          }
          const double allowed = bound * 1.001 + 1e-5 * mag + 1e-6;
          ASSERT_NEAR(out.tensor.as<float>()[i * c.m + r], ref, allowed) << "row " << i << " col " << r;
        }
      }
    }
  }
}

// Each activation row is quantized alone and summed in the same order whatever the step's size
// on each side of kQuantGemmMinRows (the decode kernel below it, the packed prefill kernel from it, as
// float weights' decode kernel and sgemm), so a row's output is bit-for-bit the same alone or in
// a decode batch, and in any prefill step.
TEST_P(QuantMatmul, ARowsOutputDoesNotDependOnTheOtherRows) {
  auto b = backend_at(GetParam());
  std::mt19937 rng(9);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q4_k, DType::q5_k, DType::q6_k, DType::mxfp4}) {
    const int64_t m = 19, k = 2 * dtype_block_elems(t), n = 120;
    auto wbytes = random_weight(t, m, k, rng);
    auto w = b->prepare_weight(Tensor(wbytes.data(), t, {m, k}), std::nullopt);
    ASSERT_TRUE(w.has_value());
    auto x = make(*b, DType::f32, {n, k});
    test::fill_uniform(x.tensor, rng);
    // Below kQuantGemmMinRows (7 rows here) the decode kernel, from it the prefill kernel: within
    // each, a row's output is the same whatever rows share its call.
    const int64_t below = cpu::kQuantGemmMinRows - 1;
    auto decode = make(*b, DType::f32, {below, m});
    b->matmul(x.tensor.rows(0, below), w->tensor, Tensor(), decode.tensor);
    for (auto [first, rows] : {std::pair<int64_t, int64_t>{5, 1}, {2, 3}, {0, below}}) {
      auto part = make(*b, DType::f32, {rows, m});
      b->matmul(x.tensor.rows(first, rows), w->tensor, Tensor(), part.tensor);
      EXPECT_EQ(std::memcmp(part.tensor.data, decode.tensor.as<float>() + first * m, static_cast<size_t>(rows * m) * 4), 0)
          << dtype_name(t) << " rows " << rows;
    }
    auto prefill = make(*b, DType::f32, {n, m});
    b->matmul(x.tensor, w->tensor, Tensor(), prefill.tensor);
    for (int64_t rows : {cpu::kQuantGemmMinRows, cpu::kQuantGemmMinRows + 3, cpu::kBlasMinRows - 1, int64_t{64}}) {
      auto part = make(*b, DType::f32, {rows, m});
      b->matmul(x.tensor.rows(9, rows), w->tensor, Tensor(), part.tensor);
      EXPECT_EQ(std::memcmp(part.tensor.data, prefill.tensor.as<float>() + 9 * m, static_cast<size_t>(rows * m) * 4), 0)
          << dtype_name(t) << " prefill rows " << rows;
    }
  }
}

// matmul_stacked (a fused projection whose row groups keep different block types): each group's
// columns are bit for bit its own matmul's, decode and prefill, with chunks that span groups.
TEST_P(QuantMatmul, StackedGroupsEqualEachGroupsOwnMatmulInItsColumns) {
  auto b = backend_at(GetParam());
  ASSERT_TRUE(b->supports_stacked_matmul());
  std::mt19937 rng(13);
  const int64_t k = 512;
  const std::vector<std::pair<DType, int64_t>> groups = {{DType::q4_k, 40}, {DType::q6_k, 24}, {DType::q8_0, 17}, {DType::q4_0, 9}, {DType::q4_1, 11},
                                                            {DType::mxfp4, 13}};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<OwnedTensor> ws;
  std::vector<Tensor> views;
  int64_t m = 0;
  for (const auto& [t, rows] : groups) {
    bytes.push_back(random_weight(t, rows, k, rng));
    auto w = b->prepare_weight(Tensor(bytes.back().data(), t, {rows, k}), std::nullopt);
    ASSERT_TRUE(w.has_value());
    views.push_back(w->tensor);
    ws.push_back(std::move(*w));
    m += rows;
  }
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{5}, cpu::kQuantGemmMinRows, int64_t{20}, cpu::kBlasMinRows, int64_t{70}}) {
    auto x = make(*b, DType::f32, {n, k});
    test::fill_uniform(x.tensor, rng);
    auto bias = make(*b, DType::f32, {m});
    test::fill_uniform(bias.tensor, rng);
    auto out = make(*b, DType::f32, {n, m});
    b->matmul_stacked(x.tensor, views, bias.tensor, out.tensor);
    int64_t col = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      const int64_t rows = groups[g].second;
      auto own = make(*b, DType::f32, {n, rows});
      b->matmul(x.tensor, views[g], Tensor(bias.tensor.as<float>() + col, DType::f32, {rows}), own.tensor);
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(std::memcmp(own.tensor.as<float>() + i * rows, out.tensor.as<float>() + i * m + col,
                              static_cast<size_t>(rows) * 4), 0)
            << dtype_name(groups[g].first) << " n=" << n << " row " << i;
      col += rows;
    }
  }
}

TEST_P(QuantMatmul, EmbeddingOfAQuantizedTableIsTheDequantizedRow) {
  auto b = backend_at(GetParam());
  std::mt19937 rng(11);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q4_k, DType::q5_k, DType::q6_k, DType::mxfp4}) {
    const int64_t vocab = 9, d = 2 * dtype_block_elems(t);
    auto bytes = random_weight(t, vocab, d, rng);
    auto table = b->prepare_weight(Tensor(bytes.data(), t, {vocab, d}), std::nullopt);
    ASSERT_TRUE(table.has_value());
    auto ids = make(*b, DType::i32, {3});
    const int32_t want[3] = {8, 0, 4};
    std::memcpy(ids.tensor.data, want, sizeof(want));
    auto out = make(*b, DType::f32, {3, d});
    b->embedding(table->tensor, ids.tensor, out.tensor);
    const auto wf = dequantized(bytes, t, vocab, d);
    for (int i = 0; i < 3; ++i)
      for (int64_t j = 0; j < d; ++j)
        ASSERT_EQ(out.tensor.as<float>()[i * d + j], wf[static_cast<size_t>(want[i] * d + j)]) << dtype_name(t);
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantMatmul, ::testing::ValuesIn(test::simd_levels()));

// The SIMD kernels (decode and prefill) against the scalar ones on the same quantized activations:
// the same sums in another order, so they agree to float rounding, and the activations quantize to the same bytes.
TEST(QuantKernels, EveryLevelAgreesWithScalar) {
  std::mt19937 rng(3);
  const auto& ref = cpu::kernels_for(cpu::SimdLevel::scalar);
  for (int l = 1; l <= static_cast<int>(cpu::detect_simd_level()); ++l) {
    const auto& simd = cpu::kernels_for(static_cast<cpu::SimdLevel>(l));
    for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q4_k, DType::q5_k, DType::q6_k, DType::mxfp4}) {
      const int64_t n = 5, m = 13, k = 4 * dtype_block_elems(t), nb = k / 32;
      std::vector<float> x(static_cast<size_t>(n * k));
      std::uniform_real_distribution<float> u(-3.0f, 3.0f);
      for (auto& v : x) v = u(rng);
      x[5] = 0.0f;
      std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block: d = 0
      std::vector<cpu::BlockQ8> xa(static_cast<size_t>(n * nb)), xb(xa.size());
      for (int64_t i = 0; i < n; ++i) {
        ref.quantize_q8(x.data() + i * k, xa.data() + i * nb, k);
        simd.quantize_q8(x.data() + i * k, xb.data() + i * nb, k);
      }
      ASSERT_EQ(std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(cpu::BlockQ8)), 0) << dtype_name(t);
      auto w = random_weight(t, m, k, rng);
      std::vector<float> oa(static_cast<size_t>(n * m)), ob(oa.size());
      cpu::QMatmulArgs a{xa.data(), n, nb, w.data(), t, dtype_bytes(t, k), m, oa.data()};
      ref.qmatmul_rows(a, 0, m);
      for (auto kernel : {simd.qmatmul_rows, simd.qgemm_rows}) {
        std::fill(ob.begin(), ob.end(), -1.0f);
        a.out = ob.data();
        kernel(a, 0, m);
        for (size_t i = 0; i < oa.size(); ++i)
          ASSERT_NEAR(ob[i], oa[i], 1e-4 * (1.0 + std::fabs(oa[i]))) << dtype_name(t) << " " << i;
        a.out = oa.data();
      }
    }
  }
}

// n rows of k activations uniform in [-3, 3), quantized by `kern` (n * k / 32 blocks).
std::vector<cpu::BlockQ8> random_q8_rows(const cpu::Kernels& kern, int64_t n, int64_t k, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(n * k));
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (auto& v : x) v = u(rng);
  const int64_t nb = k / 32;
  std::vector<cpu::BlockQ8> xq(static_cast<size_t>(n * nb));
  for (int64_t i = 0; i < n; ++i) kern.quantize_q8(x.data() + i * k, xq.data() + i * nb, k);
  return xq;
}

// `got` ([n][m]) holds -1 outside rows [b, e) and, inside, want's bytes.
void expect_rows_in_range(const std::vector<float>& got, const std::vector<float>& want, int64_t n, int64_t m, int64_t b,
                          int64_t e, const std::string& what) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < m; ++r) {
      const size_t at = static_cast<size_t>(i * m + r);
      if (r < b || r >= e) ASSERT_EQ(got[at], -1.0f) << what << " row " << r << " outside " << b << ".." << e;
      else ASSERT_EQ(std::memcmp(&got[at], &want[at], 4), 0) << what << " n " << n << " row " << r << " in " << b << ".." << e;
    }
}

// The decode kernel writes exactly the rows it is given, and each row's output is bit for bit the
// same whatever range of rows it is computed in (AVX-512 VNNI takes q4_0 / q4_1 four rows at a
// time and pads a short group), so the thread split and a stacked part's offset change nothing.
TEST(QuantKernels, ARowsDecodeOutputDoesNotDependOnItsRowRange) {
  std::mt19937 rng(6);
  for (int l = 0; l <= static_cast<int>(cpu::detect_simd_level()); ++l) {
    const auto& kern = cpu::kernels_for(static_cast<cpu::SimdLevel>(l));
    for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::mxfp4}) {
      for (int64_t n : {1, 2, 3, 5}) {
        const int64_t m = 11, k = 3 * 32, nb = k / 32;
        const std::vector<cpu::BlockQ8> xq = random_q8_rows(kern, n, k, rng);
        auto w = random_weight(t, m, k, rng);
        std::vector<float> whole(static_cast<size_t>(n * m), -1.0f);
        cpu::QMatmulArgs a{xq.data(), n, nb, w.data(), t, dtype_bytes(t, k), m, whole.data()};
        kern.qmatmul_rows(a, 0, m);
        for (const auto& [b, e] : {std::pair<int64_t, int64_t>{1, 2}, {3, 6}, {5, 11}, {2, 9}}) {
          std::vector<float> part(whole.size(), -1.0f);
          a.out = part.data();
          kern.qmatmul_rows(a, b, e);
          expect_rows_in_range(part, whole, n, m, b, e, std::string(dtype_name(t)) + " level " + std::to_string(l));
        }
      }
    }
  }
}

// The prefill kernel gives every output bit for bit the same at the AVX2 and AVX-512 levels (8-row
// panels on 256 bits, or with VNNI 16-row panels on 512 bits whose lanes compute what the 8-row
// kernel computes) and whatever range of rows it is given (a thread's share, a short last panel),
// so a row's logits do not depend on the CPU's vector width or the thread split.
TEST(QuantKernels, ThePrefillKernelIsBitForBitTheSameAtEveryLevelAndRowRange) {
  if (cpu::detect_simd_level() < cpu::SimdLevel::avx2) GTEST_SKIP() << "no SIMD level to compare";
  std::mt19937 rng(9);
  const auto& ref = cpu::kernels_for(cpu::SimdLevel::avx2);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q4_k, DType::q5_k, DType::q6_k, DType::mxfp4}) {
    for (int64_t n : {1, 3, 4, 6, 9}) {
      const int64_t m = 45, k = 2 * dtype_block_elems(t), nb = k / 32;
      const std::vector<cpu::BlockQ8> xq = random_q8_rows(ref, n, k, rng);
      auto w = random_weight(t, m, k, rng);
      std::vector<float> want(static_cast<size_t>(n * m), -1.0f);
      cpu::QMatmulArgs a{xq.data(), n, nb, w.data(), t, dtype_bytes(t, k), m, want.data()};
      ref.qgemm_rows(a, 0, m);
      for (int l = static_cast<int>(cpu::SimdLevel::avx2); l <= static_cast<int>(cpu::detect_simd_level()); ++l) {
        const auto& kern = cpu::kernels_for(static_cast<cpu::SimdLevel>(l));
        for (const auto& [b, e] : {std::pair<int64_t, int64_t>{0, 45}, {8, 45}, {3, 29}, {16, 25}, {40, 45}}) {
          std::vector<float> got(want.size(), -1.0f);
          a.out = got.data();
          kern.qgemm_rows(a, b, e);
          expect_rows_in_range(got, want, n, m, b, e, std::string(dtype_name(t)) + " level " + std::to_string(l));
        }
      }
    }
  }
}

// mxfp4's E8M0 scales at their edges (the subnormals 2^-128 and 2^-127 of e = 0 and 1, then 2^-126,
// 1 and 2^72): row r's blocks all take exponent kExps[r], so a wrong scale for one of them moves
// that row's output by a power of two, far beyond the relative tolerance, however small it is.
TEST(QuantKernels, Mxfp4ScaleEdgesAgreeWithScalarAtEveryLevel) {
  std::mt19937 rng(8);
  const auto& ref = cpu::kernels_for(cpu::SimdLevel::scalar);
  const uint8_t kExps[] = {0, 1, 2, 128, 200};
  const int64_t m = 5, k = 4 * 32, nb = k / 32;
  auto w = random_weight(DType::mxfp4, m, k, rng);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < nb; ++b) w[static_cast<size_t>((r * nb + b) * 17)] = kExps[r];
  for (int l = 1; l <= static_cast<int>(cpu::detect_simd_level()); ++l) {
    const auto& simd = cpu::kernels_for(static_cast<cpu::SimdLevel>(l));
    for (int64_t n : {1, 3}) {
      std::vector<float> x(static_cast<size_t>(n * k));
      std::uniform_real_distribution<float> u(0.5f, 3.0f);  // one sign: no cancellation to near zero
      for (auto& v : x) v = u(rng);
      std::vector<cpu::BlockQ8> xq(static_cast<size_t>(n * nb));
      for (int64_t i = 0; i < n; ++i) ref.quantize_q8(x.data() + i * k, xq.data() + i * nb, k);
      std::vector<float> oa(static_cast<size_t>(n * m)), ob(oa.size());
      cpu::QMatmulArgs a{xq.data(), n, nb, w.data(), DType::mxfp4, dtype_bytes(DType::mxfp4, k), m, oa.data()};
      ref.qmatmul_rows(a, 0, m);
      a.out = ob.data();
      simd.qmatmul_rows(a, 0, m);
      for (size_t i = 0; i < oa.size(); ++i) {
        ASSERT_NE(oa[i], 0.0f) << "row " << i % m;
        // 1% relative: with e <= 2 the scale products are float subnormals, which keep fewer bits.
        ASSERT_NEAR(ob[i], oa[i], 1e-2 * std::fabs(oa[i])) << "level " << l << " e " << int{kExps[i % m]};
      }
    }
  }
}

// The K-quant decode kernels over q8_K activations against the scalar ones, as above.
TEST(QuantKernels, Q8KDecodeAgreesWithScalarAtEveryLevel) {
  std::mt19937 rng(4);
  const auto& ref = cpu::kernels_for(cpu::SimdLevel::scalar);
  for (int l = 1; l <= static_cast<int>(cpu::detect_simd_level()); ++l) {
    const auto& simd = cpu::kernels_for(static_cast<cpu::SimdLevel>(l));
    for (DType t : {DType::q4_k, DType::q5_k, DType::q6_k}) {
      ASSERT_TRUE(cpu::decodes_with_q8k(t));
      for (int64_t n : {1, 2, 3, 7}) {
        const int64_t m = 13, k = 3 * 256, nsb = k / 256;
        std::vector<float> x(static_cast<size_t>(n * k));
        std::uniform_real_distribution<float> u(-3.0f, 3.0f);
        for (auto& v : x) v = u(rng);
        std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero superblock: d = 0
        x[3] = 40.0f;                                        // one outlier sets a superblock's scale
        std::vector<cpu::BlockQ8K> xa(static_cast<size_t>(n * nsb)), xb(xa.size());
        for (int64_t i = 0; i < n; ++i) {
          ref.quantize_q8k(x.data() + i * k, xa.data() + i * nsb, k);
          simd.quantize_q8k(x.data() + i * k, xb.data() + i * nsb, k);
        }
        ASSERT_EQ(std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(cpu::BlockQ8K)), 0) << dtype_name(t);
        auto w = random_weight(t, m, k, rng);
        std::vector<float> oa(static_cast<size_t>(n * m)), ob(oa.size(), -1.0f);
        cpu::QMatmulArgs a{nullptr, n, k / 32, w.data(), t, dtype_bytes(t, k), m, oa.data(), xa.data()};
        ref.qkmatmul_rows(a, 0, m);
        a.out = ob.data();
        simd.qkmatmul_rows(a, 2, m);  // rows from 2: the kernel writes only its rows
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t r = 0; r < m; ++r) {
            const size_t at = static_cast<size_t>(i * m + r);
            if (r < 2) {
              ASSERT_EQ(ob[at], -1.0f);
            } else {
              ASSERT_NEAR(ob[at], oa[at], 1e-4 * (1.0 + std::fabs(oa[at]))) << dtype_name(t) << " n " << n << " " << at;
            }
          }
        }
      }
    }
  }
}

TEST(QuantWeights, FloatWeightsQuantizeAtPrepareAsTheReferenceRounds) {
  auto b = backend_at("scalar");
  std::mt19937 rng(5);
  const int64_t m = 6, k = 96;
  auto w = make(*b, DType::f32, {m, k});
  test::fill_uniform(w.tensor, rng);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::mxfp4}) {
    auto q = b->prepare_weight(w.tensor, t);
    ASSERT_TRUE(q.has_value()) << q.status().message();
    ASSERT_EQ(q->tensor.dtype, t);
    ASSERT_EQ(q->tensor.nbytes(), dtype_bytes(t, m * k));
    std::vector<uint8_t> want(dtype_bytes(t, m * k));
    quant::quantize_row(w.tensor.as<float>(), t, want.data(), m * k);
    EXPECT_EQ(std::memcmp(q->tensor.data, want.data(), want.size()), 0) << dtype_name(t);
    // And back: dequantized to bf16 through prepare_weight.
    auto back = b->prepare_weight(q->tensor, DType::f32);
    ASSERT_TRUE(back.has_value());
    std::vector<float> f(static_cast<size_t>(m * k));
    quant::dequantize_row(want.data(), t, f.data(), m * k);
    EXPECT_EQ(std::memcmp(back->tensor.data, f.data(), f.size() * 4), 0);
  }
}

TEST(QuantWeights, ImpossibleConversionsAreRefusedWithTheReason) {
  auto b = backend_at("scalar");
  EXPECT_TRUE(b->supports_weight_dtype(DType::q4_k));
  std::vector<float> data(5 * 48, 0.5f);
  auto r = b->prepare_weight(Tensor(data.data(), DType::f32, {5, 48}), DType::q8_0);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("not whole blocks of 32"), std::string::npos) << r.status().message();
  std::vector<float> ok(4 * 256, 0.5f);
  r = b->prepare_weight(Tensor(ok.data(), DType::f32, {4, 256}), DType::q4_k);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("only from GGUF"), std::string::npos) << r.status().message();
  std::vector<uint8_t> q(dtype_bytes(DType::q4_0, 64));
  r = b->prepare_weight(Tensor(q.data(), DType::q4_0, {2, 32}), DType::q8_0);
  ASSERT_FALSE(r.has_value());
}

}  // namespace
}  // namespace brigade
