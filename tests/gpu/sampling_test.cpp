// Device sampling: argmax against the host, and the sampling rules (greedy at temperature 0,
// top-k = 1 keeps the largest logit, draws stay inside the top-k / top-p set with ties at the cut
// kept, same seed and step give the same token, and the empirical distribution over many seeds
// follows the softmax).
#include <algorithm>
#include <cmath>
#include <map>

#include "core/sampling.h"
#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

std::vector<int32_t> run_sample(const std::vector<float>& logits, int64_t vocab, const std::vector<SampleParams>& params) {
  const int64_t n = static_cast<int64_t>(params.size());
  const auto lg = put(*gpu(), DType::f32, {n, vocab}, logits);
  auto pbuf = gpu()->allocate(params.size() * sizeof(SampleParams));
  EXPECT_TRUE(pbuf.has_value());
  const Tensor pt(pbuf->data(), DType::u8, {static_cast<int64_t>(params.size() * sizeof(SampleParams))});
  gpu()->upload(pt, params.data());
  const auto tok = empty(*gpu(), DType::i32, {n});
  gpu()->sample(lg.tensor, pt, tok.tensor);
  const auto f = get(*gpu(), tok.tensor);
  return std::vector<int32_t>(f.begin(), f.end());
}

TEST(GpuSampling, ArgmaxMatchesHost) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(8);
  const int64_t n = 5, vocab = 128256;
  auto logits = random_values(rng, n * vocab, -10, 10);
  logits[3 * vocab + 77] = 50.0f;  // a clear winner in row 3
  const auto lg = put(*gpu(), DType::f32, {n, vocab}, logits);
  const auto tok = empty(*gpu(), DType::i32, {n});
  gpu()->argmax(lg.tensor, tok.tensor);
  const auto got = get(*gpu(), tok.tensor);
  for (int64_t r = 0; r < n; ++r) {
    const auto* row = logits.data() + r * vocab;
    EXPECT_EQ(static_cast<int64_t>(got[static_cast<size_t>(r)]), std::max_element(row, row + vocab) - row) << r;
  }
  EXPECT_EQ(got[3], 77.0f);
}

TEST(GpuSampling, RulesAndDistribution) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(9);
  const int64_t vocab = 1000;
  const auto base = random_values(rng, vocab, -3, 3);
  const int best = static_cast<int>(std::max_element(base.begin(), base.end()) - base.begin());
  std::vector<int> order(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return base[static_cast<size_t>(a)] > base[static_cast<size_t>(b)]; });

  // Rows: greedy, top_k = 1, top_k = 5, top_p = 0.3, min_p = 0.2, and 2000 plain draws with
  // distinct seeds.
  const float no_min_p = -INFINITY;
  std::vector<SampleParams> params;
  params.push_back({0.0f, 0, 1.0f, no_min_p, 1, 0});
  params.push_back({1.0f, 1, 1.0f, no_min_p, 2, 0});
  for (uint64_t s = 0; s < 50; ++s) params.push_back({1.0f, 5, 1.0f, no_min_p, 100 + s, 3});
  for (uint64_t s = 0; s < 50; ++s) params.push_back({0.7f, 0, 0.3f, no_min_p, 200 + s, 3});
  for (uint64_t s = 0; s < 50; ++s) params.push_back({1.0f, 0, 1.0f, std::log(0.2f), 300 + s, 3});
  const size_t plain = params.size();
  const int n_plain = 2000;
  for (int s = 0; s < n_plain; ++s) params.push_back({1.0f, 0, 1.0f, no_min_p, static_cast<uint64_t>(1000 + s), 7});
  std::vector<float> logits;
  for (size_t r = 0; r < params.size(); ++r) logits.insert(logits.end(), base.begin(), base.end());
  const auto got = run_sample(logits, vocab, params);
  EXPECT_EQ(got[0], best);  // greedy: the lowest index of the largest logit
  // top_k = 1 keeps the largest logit, which this row holds twice (bf16 rounds both to 3.0):
  // either may be drawn.
  EXPECT_EQ(base[static_cast<size_t>(got[1])], base[static_cast<size_t>(best)]) << got[1];
  // top_k = 5 keeps every token whose logit reaches the 5th largest, ties included (the rule of
  // sample_like_device): in this row of bf16 values the 5th to 8th largest are equal.
  const float fifth = base[static_cast<size_t>(order[4])];
  for (size_t r = 2; r < 52; ++r) EXPECT_GE(base[static_cast<size_t>(got[r])], fifth) << got[r];
  // The smallest prefix of the sorted probabilities (temperature 0.7) with mass >= 0.3.
  double z = 0.0, mass = 0.0;
  for (float x : base) z += std::exp(x / 0.7);
  std::vector<int> nucleus;
  for (int t : order) {
    nucleus.push_back(t);
    mass += std::exp(base[static_cast<size_t>(t)] / 0.7) / z;
    if (mass >= 0.3) break;
  }
  for (size_t r = 52; r < 102; ++r) EXPECT_NE(std::find(nucleus.begin(), nucleus.end(), got[r]), nucleus.end()) << got[r];
  // min_p 0.2: only tokens whose probability is at least 0.2 of the largest.
  const float top = base[static_cast<size_t>(best)];
  for (size_t r = 102; r < 152; ++r) EXPECT_GE(std::exp(base[static_cast<size_t>(got[r])] - top), 0.2f) << got[r];

  // The host sampler follows the same rule and stream (core/sample_params.h): the same tokens,
  // except a draw on a probability boundary (the GPU sums in another order, with __expf).
  size_t same = 0;
  for (size_t r = 0; r < params.size(); ++r) same += sample_like_device(base, params[r]) == got[r];
  EXPECT_GE(same, params.size() * 99 / 100) << same << " of " << params.size() << " rows equal the host sampler's";

  // Same (seed, step) gives the same token.
  const auto again = run_sample(logits, vocab, params);
  EXPECT_EQ(got, again);

  // The top 3 tokens' frequencies over the plain draws follow the softmax (4-sigma bounds).
  std::map<int, int> counts;
  for (size_t r = plain; r < got.size(); ++r) ++counts[got[r]];
  double zz = 0.0;
  for (float x : base) zz += std::exp(x);
  for (int i = 0; i < 3; ++i) {
    const int t = order[static_cast<size_t>(i)];
    const double p = std::exp(base[static_cast<size_t>(t)]) / zz;
    const double sigma = std::sqrt(n_plain * p * (1 - p));
    EXPECT_NEAR(counts[t], n_plain * p, 4 * sigma + 1) << "token " << t;
  }
}

}  // namespace
}  // namespace brigade
