#include "core/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace brigade {
namespace {

TEST(Sampling, GreedyTakesTheLowestIdOnTies) {
  std::vector<float> l = {0.5f, 2.0f, 2.0f, -1.0f};
  SamplingConfig c;
  c.temperature = 0.0f;
  EXPECT_EQ(sample_token(l, c, 0).token, 1);
  c.temperature = 1.0f;
  c.top_k = 1;
  EXPECT_EQ(sample_token(l, c, 7).token, 1) << "top_k = 1 is greedy";
}

TEST(Sampling, LogprobIsTheLogSoftmax) {
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  const double z = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  SamplingConfig c;
  c.temperature = 0.0f;
  auto s = sample_token(l, c, 0, true);
  EXPECT_EQ(s.token, 2);
  EXPECT_NEAR(s.logprob, 3.0 - z, 1e-6);
}

TEST(Sampling, SameSeedSameDrawsOtherSeedOtherDraws) {
  std::vector<float> l(50);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(std::sin(static_cast<double>(i)));
  SamplingConfig a;
  a.seed = 42;
  SamplingConfig b = a;
  b.seed = 43;
  int same_seed_equal = 0, other_seed_equal = 0;
  for (uint64_t k = 0; k < 200; ++k) {
    same_seed_equal += sample_token(l, a, k).token == sample_token(l, a, k).token;
    other_seed_equal += sample_token(l, a, k).token == sample_token(l, b, k).token;
  }
  EXPECT_EQ(same_seed_equal, 200);
  EXPECT_LT(other_seed_equal, 100);
}

TEST(Sampling, DrawsFollowTheDistribution) {
  // p = softmax(log(0.1), log(0.2), log(0.7)) = (0.1, 0.2, 0.7).
  std::vector<float> l = {std::log(0.1f), std::log(0.2f), std::log(0.7f)};
  SamplingConfig c;
  c.seed = 5;
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int k = 0; k < n; ++k) ++counts[sample_token(l, c, static_cast<uint64_t>(k)).token];
  EXPECT_NEAR(counts[0] / double(n), 0.1, 0.015);
  EXPECT_NEAR(counts[1] / double(n), 0.2, 0.015);
  EXPECT_NEAR(counts[2] / double(n), 0.7, 0.015);
}

TEST(Sampling, TopPAndMinPCutTheTail) {
  std::vector<float> l = {std::log(0.05f), std::log(0.15f), std::log(0.8f)};
  SamplingConfig c;
  c.top_p = 0.75f;
  for (uint64_t k = 0; k < 500; ++k) EXPECT_EQ(sample_token(l, c, k).token, 2) << "token 2 alone holds 0.8 >= 0.75";
  c.top_p = 0.9f;
  bool saw1 = false;
  for (uint64_t k = 0; k < 500; ++k) saw1 |= sample_token(l, c, k).token == 1;
  EXPECT_TRUE(saw1) << "0.9 needs token 1 too";
  c.top_p = 1.0f;
  c.min_p = 0.1f;  // floor 0.08: token 0 (0.05) goes, token 1 (0.15) stays
  saw1 = false;
  for (uint64_t k = 0; k < 500; ++k) {
    int32_t t = sample_token(l, c, k).token;
    EXPECT_NE(t, 0);
    saw1 |= t == 1;
  }
  EXPECT_TRUE(saw1);
}

TEST(Sampling, PenaltiesFollowVllmSemantics) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f};
  PenaltyHistory h;
  h.seen = {0, 1, 2};
  h.output_counts = {{2, 3}};
  SamplingConfig c;
  c.repetition_penalty = 2.0f;
  c.presence_penalty = 0.25f;
  c.frequency_penalty = 0.1f;
  apply_penalties(l, c, h);
  EXPECT_FLOAT_EQ(l[0], 1.0f) << "positive logit divided";
  EXPECT_FLOAT_EQ(l[1], -4.0f) << "negative logit multiplied";
  EXPECT_FLOAT_EQ(l[2], 0.5f - 0.25f - 0.3f) << "repetition, then presence and 3 x frequency";
  EXPECT_FLOAT_EQ(l[3], 0.5f) << "unseen token untouched";
}

TEST(Sampling, TopLogprobsAreSortedLogSoftmax) {
  std::vector<float> l = {0.0f, 3.0f, 1.0f, 3.0f, -1.0f};
  auto top = top_logprobs(l, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 3);
  EXPECT_EQ(top[2].first, 2);
  double z = 0;
  for (float v : l) z += std::exp(static_cast<double>(v));
  EXPECT_NEAR(top[0].second, 3.0 - std::log(z), 1e-6);
  EXPECT_NEAR(top[2].second, 1.0 - std::log(z), 1e-6);
  EXPECT_EQ(top_logprobs(l, 10).size(), 5u);
  EXPECT_TRUE(top_logprobs(l, 0).empty());
}

}  // namespace
}  // namespace brigade
