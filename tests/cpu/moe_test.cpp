// The MoE ops against plain references: moe_route against softmax + a sort in double (ties, the
// normalisation on and off, k = E), moe_experts against a loop over each token's k experts in
// double, at every SIMD level, with f32 and bf16 weights, below and above the BLAS row count.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cpu/ops.h"
#include "tests/cpu/cpu_test_util.h"

namespace brigade {
namespace {

using test::backend_at;
using test::get;
using test::make;

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(Backend& b, const std::vector<float>& logits, int64_t n, int64_t n_experts, int k, bool normalize) {
  auto l = make(b, DType::f32, {n, n_experts});
  std::copy(logits.begin(), logits.end(), l.tensor.as<float>());
  auto ids = make(b, DType::i32, {n, k});
  auto w = make(b, DType::f32, {n, k});
  MoeRouting r;
  r.k = k;
  r.normalize = normalize;
  b.moe_route(l.tensor, r, ids.tensor, w.tensor);
  return {{ids.tensor.as<int32_t>(), ids.tensor.as<int32_t>() + n * k}, {w.tensor.as<float>(), w.tensor.as<float>() + n * k}};
}

TEST(CpuMoe, RouteIsSoftmaxTopKInDescendingOrder) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const int64_t n = 13, n_experts = 16;
  std::vector<float> logits(static_cast<size_t>(n * n_experts));
  for (float& v : logits) v = u(rng);
  auto b = make_cpu_backend({2});
  for (const bool normalize : {false, true}) {
    for (const int k : {1, 2, 5, 16}) {
      SCOPED_TRACE(testing::Message() << "k=" << k << " normalize=" << normalize);
      const Routed r = route(*b, logits, n, n_experts, k, normalize);
      for (int64_t t = 0; t < n; ++t) {
        const float* l = logits.data() + t * n_experts;
        std::vector<double> p(static_cast<size_t>(n_experts));
        const double mx = *std::max_element(l, l + n_experts);
        for (int64_t e = 0; e < n_experts; ++e) p[static_cast<size_t>(e)] = std::exp(l[e] - mx);
        const double sum = std::accumulate(p.begin(), p.end(), 0.0);
        std::vector<int32_t> order(static_cast<size_t>(n_experts));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t z) { return l[a] > l[z]; });
        double top = 0.0;
        for (int j = 0; j < k; ++j) top += p[static_cast<size_t>(order[static_cast<size_t>(j)])] / sum;
        for (int j = 0; j < k; ++j) {
          const size_t at = static_cast<size_t>(t * k + j);
          const int32_t e = order[static_cast<size_t>(j)];
          EXPECT_EQ(r.ids[at], e) << "token " << t << " slot " << j;
          const double want = p[static_cast<size_t>(e)] / sum / (normalize ? top : 1.0);
          EXPECT_NEAR(r.weights[at], want, 1e-6);
        }
      }
      if (k == n_experts) {  // every expert: the weights are the whole softmax and sum to 1
        const float s = std::accumulate(r.weights.begin(), r.weights.begin() + k, 0.0f);
        EXPECT_NEAR(s, 1.0f, 1e-5f);
      }
    }
  }
}

// Equal probabilities are taken lowest index first (torch.topk), and the order of the chosen
// ones is by probability, not by index.
TEST(CpuMoe, RouteTiesTakeTheLowestIndex) {
  auto b = make_cpu_backend({1});
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f, 2.0f, 1.0f, 2.0f, -3.0f, 1.0f};
  const Routed r = route(*b, logits, 1, 8, 4, true);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3, 5, 2}));
  EXPECT_NEAR(r.weights[0], r.weights[1], 1e-7);
  EXPECT_NEAR(std::accumulate(r.weights.begin(), r.weights.end(), 0.0f), 1.0f, 1e-6f);
  const Routed all_equal = route(*b, std::vector<float>(8, 0.25f), 1, 8, 3, false);
  EXPECT_EQ(all_equal.ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(all_equal.weights[2], 0.125f, 1e-7f);
}

struct ExpertCase {
  int64_t n, d, inter, n_experts;
  int k;
  DType w_dtype;
};

// out[t] = sum_j w[t,j] * down_e (silu(gate_e x) * up_e x) in double from the weights as stored.
std::vector<double> experts_reference(const Tensor& x, const Tensor& gu, const Tensor& down, const std::vector<int32_t>& ids,
                                      const std::vector<float>& wts, const ExpertCase& c) {
  std::vector<double> out(static_cast<size_t>(c.n * c.d), 0.0);
  std::vector<double> act(static_cast<size_t>(c.inter));
  for (int64_t t = 0; t < c.n; ++t) {
    for (int j = 0; j < c.k; ++j) {
      const int64_t e = ids[static_cast<size_t>(t * c.k + j)];
      for (int64_t i = 0; i < c.inter; ++i) {
        double g = 0.0, u = 0.0;
        for (int64_t h = 0; h < c.d; ++h) {
          const double xv = get(x, t * c.d + h);
          g += xv * get(gu, (e * 2 * c.inter + i) * c.d + h);
          u += xv * get(gu, (e * 2 * c.inter + c.inter + i) * c.d + h);
        }
        act[static_cast<size_t>(i)] = g / (1.0 + std::exp(-g)) * u;
      }
      for (int64_t h = 0; h < c.d; ++h) {
        double y = 0.0;
        for (int64_t i = 0; i < c.inter; ++i) y += get(down, (e * c.d + h) * c.inter + i) * act[static_cast<size_t>(i)];
        out[static_cast<size_t>(t * c.d + h)] += wts[static_cast<size_t>(t * c.k + j)] * y;
      }
    }
  }
  return out;
}

TEST(CpuMoe, ExpertsMatchAPlainLoop) {
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level);
    for (const ExpertCase c : {ExpertCase{1, 32, 16, 8, 2, DType::f32}, ExpertCase{7, 64, 24, 8, 8, DType::bf16},
                               ExpertCase{100, 48, 32, 4, 2, DType::f32}, ExpertCase{5, 40, 8, 16, 3, DType::bf16}}) {
      SCOPED_TRACE(testing::Message() << level << " n=" << c.n << " E=" << c.n_experts << " k=" << c.k);
      std::mt19937 rng(static_cast<uint32_t>(c.n * 131 + c.n_experts));
      auto x = make(*b, DType::f32, {c.n, c.d});
      auto gu = make(*b, c.w_dtype, {c.n_experts * 2 * c.inter, c.d});
      auto down = make(*b, c.w_dtype, {c.n_experts * c.d, c.inter});
      test::fill_uniform(x.tensor, rng, -2, 2);
      test::fill_uniform(gu.tensor, rng, -0.3f, 0.3f);
      test::fill_uniform(down.tensor, rng, -0.3f, 0.3f);
      // Routing from random logits, so some experts get many tokens and some none.
      std::vector<float> logits(static_cast<size_t>(c.n * c.n_experts));
      std::uniform_real_distribution<float> u(-3, 3);
      for (float& v : logits) v = u(rng);
      const Routed r = route(*b, logits, c.n, c.n_experts, c.k, true);
      auto ids = make(*b, DType::i32, {c.n, c.k});
      auto wts = make(*b, DType::f32, {c.n, c.k});
      std::copy(r.ids.begin(), r.ids.end(), ids.tensor.as<int32_t>());
      std::copy(r.weights.begin(), r.weights.end(), wts.tensor.as<float>());
      const size_t ws_bytes = b->moe_workspace_bytes(c.n, c.k, c.d, c.inter);
      auto ws = make(*b, DType::u8, {static_cast<int64_t>(ws_bytes)});
      auto out = make(*b, DType::f32, {c.n, c.d});
      b->moe_experts(x.tensor, gu.tensor, down.tensor, ids.tensor, wts.tensor, ws.tensor, out.tensor);
      const auto ref = experts_reference(x.tensor, gu.tensor, down.tensor, r.ids, r.weights, c);
      double worst = 0.0, scale = 0.0;
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, std::abs(get(out.tensor, static_cast<int64_t>(i)) - ref[i]));
        scale = std::max(scale, std::abs(ref[i]));
      }
      EXPECT_LT(worst, 1e-5 * std::max(1.0, scale));
      EXPECT_GT(scale, 0.01);  // the outputs are not trivially zero
    }
  }
}

// A token's result does not depend on the other tokens of the step: token 0 alone equals token 0
// in a batch of 9 whose other tokens pick the same experts and others.
TEST(CpuMoe, ATokensResultDoesNotDependOnItsBatch) {
  auto b = make_cpu_backend({2});
  const int64_t d = 32, inter = 16, n_experts = 4, n = 9;
  const int k = 2;
  std::mt19937 rng(3);
  auto x = make(*b, DType::f32, {n, d});
  auto gu = make(*b, DType::f32, {n_experts * 2 * inter, d});
  auto down = make(*b, DType::f32, {n_experts * d, inter});
  for (const auto* t : {&x, &gu, &down}) test::fill_uniform(t->tensor, rng);
  auto ids = make(*b, DType::i32, {n, k});
  auto wts = make(*b, DType::f32, {n, k});
  for (int64_t i = 0; i < n * k; ++i) {
    ids.tensor.as<int32_t>()[i] = static_cast<int32_t>((i * 3 + i / k) % n_experts);
    wts.tensor.as<float>()[i] = 0.25f + 0.05f * static_cast<float>(i % 5);
  }
  auto ws = make(*b, DType::u8, {static_cast<int64_t>(b->moe_workspace_bytes(n, k, d, inter))});
  auto all = make(*b, DType::f32, {n, d});
  auto one = make(*b, DType::f32, {1, d});
  b->moe_experts(x.tensor, gu.tensor, down.tensor, ids.tensor, wts.tensor, ws.tensor, all.tensor);
  b->moe_experts(x.tensor.rows(0, 1), gu.tensor, down.tensor, ids.tensor.rows(0, 1), wts.tensor.rows(0, 1), ws.tensor,
                 one.tensor);
  for (int64_t h = 0; h < d; ++h) EXPECT_EQ(one.tensor.as<float>()[h], all.tensor.as<float>()[h]);
}

}  // namespace
}  // namespace brigade
