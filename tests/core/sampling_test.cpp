#include "core/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

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

TEST(Sampling, LogitBiasThenTheMinTokensMask) {
  SamplingConfig c;
  c.logit_bias = {{1, 3.0f}, {3, -100.0f}, {7, 5.0f}};  // 7 is outside this vocabulary: ignored
  c.min_tokens = 2;
  c.end_ids = {0, 1, 9};
  EXPECT_TRUE(c.shapes_logits());
  const std::vector<float> raw = {2.0f, -2.0f, 1.0f, 0.5f};
  for (uint64_t n : {0u, 1u}) {  // below min_tokens the stop ids are masked, bias or not
    std::vector<float> l = raw;
    apply_logit_rules(l, c, n);
    EXPECT_EQ(l[0], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(l[1], -std::numeric_limits<float>::infinity()) << "a +3 bias does not lift the mask";
    EXPECT_FLOAT_EQ(l[2], 1.0f);
    EXPECT_FLOAT_EQ(l[3], -99.5f);
    EXPECT_EQ(sample_token(l, SamplingConfig{.temperature = 0.0f}, n).token, 2);
    EXPECT_EQ(sample_token(l, SamplingConfig{.temperature = 1.0f, .seed = 5}, n).token, 2)
        << "masked ids have no mass";
  }
  std::vector<float> l = raw;
  apply_logit_rules(l, c, 2);
  EXPECT_EQ(l, (std::vector<float>{2.0f, 1.0f, 1.0f, -99.5f}));
  EXPECT_FALSE(SamplingConfig{}.shapes_logits());
}

// vLLM's NoBadWordsLogitsProcessor: a one-token word is always masked; a longer word's last
// token only when the output's last tokens are the word's others; nothing else moves.
TEST(Sampling, BadWordsMaskTheLastTokenAfterTheirPrefix) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<int32_t>> words = {{4}, {1, 2, 3}, {5, 6}};
  const auto apply = [&](std::vector<int32_t> tail) {
    std::vector<float> row(8, 1.0f);
    apply_bad_words(row, words, tail);
    return row;
  };
  EXPECT_EQ(apply({}), (std::vector<float>{1, 1, 1, 1, -inf, 1, 1, 1}));  // too short for the others
  EXPECT_EQ(apply({0, 1, 2}), (std::vector<float>{1, 1, 1, -inf, -inf, 1, 1, 1}));
  EXPECT_EQ(apply({1, 2, 0}), (std::vector<float>{1, 1, 1, 1, -inf, 1, 1, 1}));  // the prefix must end the output
  EXPECT_EQ(apply({2}), (std::vector<float>{1, 1, 1, 1, -inf, 1, 1, 1}));
  EXPECT_EQ(apply({5}), (std::vector<float>{1, 1, 1, 1, -inf, 1, -inf, 1}));
  EXPECT_EQ(apply({1, 2, 5}), (std::vector<float>{1, 1, 1, 1, -inf, 1, -inf, 1}));
  std::vector<float> small(3, 1.0f);  // ids past the vocabulary are skipped
  apply_bad_words(small, {{7}, {0, 9}}, std::vector<int32_t>{0});
  EXPECT_EQ(small, (std::vector<float>{1, 1, 1}));
}

TEST(Sampling, TheHistoryKeepsTheOutputTailBadWordsNeed) {
  SamplingConfig cfg;
  PenaltyHistory h;
  h.add_output(cfg, 3);
  EXPECT_TRUE(h.output_tail.empty()) << "no bad words: no tail";
  EXPECT_TRUE(h.output_counts.empty()) << "no penalties: no counts";
  cfg.bad_words = {{1, 2}};
  const int n = 1000;
  for (int i = 0; i < n; ++i) h.add_output(cfg, i);
  const size_t keep = SamplingConfig::kMaxBadWordTokens - 1;
  ASSERT_GE(h.output_tail.size(), keep);
  EXPECT_LT(h.output_tail.size(), 2 * keep) << "bounded";
  for (size_t j = 0; j < keep; ++j)  // the newest keep tokens, in order
    EXPECT_EQ(h.output_tail[h.output_tail.size() - keep + j], n - static_cast<int>(keep) + static_cast<int>(j));
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

// ---- the device sampler's rule on the host (sample_like_device, the CPU Backend::sample) ----

SampleParams device_params(float temperature, int top_k, float top_p, uint64_t seed, uint64_t step) {
  SampleParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.seed = seed;
  p.step = step;
  return p;
}

TEST(DeviceSampling, GreedyAtZeroTemperatureTakesTheLowestIdOnTies) {
  std::vector<float> l = {0.5f, 2.0f, 2.0f, -1.0f};
  for (uint64_t step = 0; step < 20; ++step) EXPECT_EQ(sample_like_device(l, device_params(0.0f, 0, 1.0f, 9, step)), 1);
}

// Two equal logits: the kept mass is 2 and token 0 covers [0, 1), so the token is exactly
// whether device_uniform(seed, step) < 0.5. Pins the stream the GPU kernel uses too.
TEST(DeviceSampling, DrawsComeFromTheDeviceUniformStream) {
  std::vector<float> l = {1.5f, 1.5f};
  int ones = 0;
  for (uint64_t step = 0; step < 400; ++step) {
    const float u = device_uniform(77, step);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    const int32_t t = sample_like_device(l, device_params(0.7f, 0, 1.0f, 77, step));
    EXPECT_EQ(t, u < 0.5f ? 0 : 1) << "step " << step;
    ones += t;
  }
  EXPECT_GT(ones, 150);
  EXPECT_LT(ones, 250);
}

TEST(DeviceSampling, FollowsTheSoftmaxWithTemperature) {
  // p(1) = 0.75 at temperature 1; at temperature 0.5 the odds square: 9 : 1.
  std::vector<float> l = {std::log(0.25f), std::log(0.75f)};
  int t1 = 0, t05 = 0;
  const int n = 4000;
  for (int step = 0; step < n; ++step) {
    t1 += sample_like_device(l, device_params(1.0f, 0, 1.0f, 5, static_cast<uint64_t>(step)));
    t05 += sample_like_device(l, device_params(0.5f, 0, 1.0f, 5, static_cast<uint64_t>(step)));
  }
  EXPECT_NEAR(static_cast<double>(t1) / n, 0.75, 0.03);
  EXPECT_NEAR(static_cast<double>(t05) / n, 0.9, 0.03);
}

TEST(DeviceSampling, DrawsStayInsideTopKAndTopP) {
  std::vector<float> l = {0.1f, 3.0f, 0.2f, 2.9f, 2.8f, -1.0f, 0.0f, 2.7f};
  std::map<int32_t, int> top3, nucleus;
  for (uint64_t step = 0; step < 600; ++step) {
    ++top3[sample_like_device(l, device_params(1.0f, 3, 1.0f, 11, step))];
    // exp(3.0) alone is 0.33 of the mass, with 2.9 about 0.63: top_p 0.5 keeps those two.
    ++nucleus[sample_like_device(l, device_params(1.0f, 0, 0.5f, 11, step))];
  }
  EXPECT_EQ(top3.size(), 3u);
  for (const auto& [t, n] : top3) EXPECT_TRUE(t == 1 || t == 3 || t == 4) << t;
  EXPECT_EQ(nucleus.size(), 2u);
  for (const auto& [t, n] : nucleus) EXPECT_TRUE(t == 1 || t == 3) << t;
  EXPECT_EQ(sample_like_device(l, device_params(2.0f, 1, 1.0f, 3, 4)), 1) << "top_k 1 keeps the largest only";
}

TEST(DeviceSampling, SameSeedAndStepSameTokenOtherSeedsDiffer) {
  std::vector<float> l(64);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(std::cos(static_cast<double>(i)));
  int differ = 0;
  for (uint64_t step = 0; step < 100; ++step) {
    const SampleParams a = device_params(1.0f, 0, 1.0f, 1, step), b = device_params(1.0f, 0, 1.0f, 2, step);
    EXPECT_EQ(sample_like_device(l, a), sample_like_device(l, a));
    differ += sample_like_device(l, a) != sample_like_device(l, b);
  }
  EXPECT_GT(differ, 50);
}

}  // namespace
}  // namespace brigade
