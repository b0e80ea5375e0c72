// matmul against a double-precision reference, for every SIMD level runnable here, every weight
// dtype, odd shapes and the batch sizes of decode (1, 3, 8, 33) and prefill (512, the BLAS path).
//
// Tolerance: f32 accumulation over k terms in any order errs by at most ~k * 2^-24 of
// sum_j |x_j * w_j|; we allow 2e-5 of that sum (k <= 300 here) plus 1e-6 absolute. The reference
// reads the prepared (already rounded) weights, so bf16/f16 rounding is not part of the error.
#include <cmath>
#include <cstdlib>

#include "cpu/openblas_core.h"
#include "cpu/ops.h"
#include "tests/cpu/cpu_test_util.h"

namespace brigade {
namespace {

using test::backend_at;
using test::get;
using test::make;

struct Case {
  int64_t n, m, k;
};

// Returns out [n, m] of matmul on `b` for weights `w_host` (f32) prepared as `wt`.
std::vector<float> run(Backend& b, const Tensor& x_host, const Tensor& w_host, DType wt,
                       const Tensor& bias_host, std::vector<double>* ref, std::vector<double>* abs_sum) {
  auto w = b.prepare_weight(w_host, wt);
  EXPECT_TRUE(w.has_value());
  EXPECT_EQ(w->tensor.dtype, wt);
  const int64_t n = x_host.dim(0), m = w_host.dim(0), k = w_host.dim(1);
  auto out = make(b, DType::f32, {n, m});
  b.matmul(x_host, w->tensor, bias_host, out.tensor);
  b.synchronize();
  if (ref != nullptr) {
    ref->assign(static_cast<size_t>(n * m), 0.0);
    abs_sum->assign(static_cast<size_t>(n * m), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < m; ++r) {
        double s = bias_host.empty() ? 0.0 : get(bias_host, r), a = std::fabs(s);
        for (int64_t j = 0; j < k; ++j) {
          const double p = get(x_host, i * k + j) * get(w->tensor, r * k + j);
          s += p;
          a += std::fabs(p);
        }
        (*ref)[static_cast<size_t>(i * m + r)] = s;
        (*abs_sum)[static_cast<size_t>(i * m + r)] = a;
      }
  }
  return test::to_vector(out.tensor);
}

TEST(CpuMatmul, MatchesReferenceAtEveryLevelAndDtype) {
  std::mt19937 rng(1234);
  auto host = backend_at("scalar", 1);
  const Case cases[] = {{1, 7, 13}, {3, 33, 100}, {8, 130, 257}, {33, 64, 96}, {512, 70, 129}, {1, 1, 1}};
  for (const Case& cs : cases) {
    auto x = make(*host, DType::f32, {cs.n, cs.k});
    auto w = make(*host, DType::f32, {cs.m, cs.k});
    auto bias = make(*host, DType::f32, {cs.m});
    test::fill_uniform(x.tensor, rng);
    test::fill_uniform(w.tensor, rng);
    test::fill_uniform(bias.tensor, rng);
    for (DType wt : {DType::f32, DType::bf16, DType::f16}) {
      for (bool with_bias : {false, true}) {
        const Tensor b = with_bias ? bias.tensor : Tensor();
        std::vector<double> ref, abs_sum;
        std::vector<float> scalar_out;
        for (const std::string& level : test::simd_levels()) {
          auto be = backend_at(level, 2);
          const bool first = scalar_out.empty();
          auto got = run(*be, x.tensor, w.tensor, wt, b, first ? &ref : nullptr, &abs_sum);
          if (first) scalar_out = got;
          for (size_t i = 0; i < got.size(); ++i) {
            const double tol = 2e-5 * abs_sum[i] + 1e-6;
            ASSERT_NEAR(got[i], ref[i], tol) << level << " " << dtype_name(wt) << " n=" << cs.n
                                             << " m=" << cs.m << " k=" << cs.k << " i=" << i;
            // Every level agrees with scalar within twice the reference tolerance.
            ASSERT_NEAR(got[i], scalar_out[i], 2 * tol) << level << " vs scalar";
          }
        }
      }
    }
  }
}

TEST(CpuMatmul, BiasInHalfPrecision) {
  std::mt19937 rng(7);
  auto b = backend_at(test::simd_levels().back(), 2);
  auto x = make(*b, DType::f32, {2, 40});
  auto w = make(*b, DType::f32, {9, 40});
  auto bias = make(*b, DType::bf16, {9});
  test::fill_uniform(x.tensor, rng);
  test::fill_uniform(w.tensor, rng);
  test::fill_uniform(bias.tensor, rng);
  std::vector<double> ref, abs_sum;
  auto got = run(*b, x.tensor, w.tensor, DType::f32, bias.tensor, &ref, &abs_sum);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 2e-5 * abs_sum[i] + 1e-6);
}

TEST(CpuMatmul, BatchRowsAreIndependent) {
  // Row i of a batched matmul is bit-identical to the same row computed alone below the BLAS
  // threshold, whatever tiles (6x2, 4x3, 3x2, 2x4, 1x4) the batch is cut into: every output is
  // one accumulator summed in the same column order. Batched decode relies on this (seeded and
  // greedy outputs do not depend on what else is in the step).
  std::mt19937 rng(99);
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level, 2);
    for (int64_t n : {int64_t{2}, int64_t{3}, int64_t{5}, int64_t{11}, cpu::kBlasMinRows - 1}) {
      auto x = make(*b, DType::f32, {n, 200});
      auto w = make(*b, DType::f32, {50, 200});
      test::fill_uniform(x.tensor, rng);
      test::fill_uniform(w.tensor, rng);
      auto wp = b->prepare_weight(w.tensor, DType::bf16);
      ASSERT_TRUE(wp.has_value());
      auto all = make(*b, DType::f32, {n, 50});
      b->matmul(x.tensor, wp->tensor, Tensor(), all.tensor);
      for (int64_t i = 0; i < n; ++i) {
        auto one = make(*b, DType::f32, {1, 50});
        b->matmul(x.tensor.rows(i, 1), wp->tensor, Tensor(), one.tensor);
        for (int64_t r = 0; r < 50; ++r)
          ASSERT_EQ(one.tensor.as<float>()[r], all.tensor.as<float>()[i * 50 + r])
              << level << " n " << n << " row " << i << " col " << r;
      }
    }
  }
}

}  // namespace
// A core chosen by the caller (OPENBLAS_CORETYPE) is never second-guessed; the re-run itself is
// checked end to end by cli_smoke (no Prescott kernels on an AVX-512 CPU).
TEST(OpenblasCore, NothingIsRequestedWhereTheCallerChoseACore) {
  const char* had = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = had != nullptr ? had : "";
  ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  EXPECT_EQ(cpu::openblas_core_to_request(), "");
  if (had != nullptr) ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  else ::unsetenv("OPENBLAS_CORETYPE");
  EXPECT_FALSE(cpu::openblas_core().empty());
}

}  // namespace brigade
