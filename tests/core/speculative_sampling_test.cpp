// core/sampling.h verify_drafts: the acceptance rule of speculative decoding.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "core/sampling.h"

namespace brigade {
namespace {

// softmax(logits / t): what sample_like_device draws from without top-k/top-p/min-p.
std::vector<double> softmax(const std::vector<float>& logits, double t) {
  std::vector<double> p;
  double z = 0;
  for (float x : logits) z += std::exp(x / t);
  for (float x : logits) p.push_back(std::exp(x / t) / z);
  return p;
}

// Pearson's chi-square of counts against probabilities p (cells with p > 0).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    const double e = p[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST(VerifyDrafts, GreedyAcceptsTheLongestPrefixThatMatchesTheArgmax) {
  // Row j's argmax: 3, 1, 4, 0.
  const std::vector<std::vector<float>> rows = {{0, 0, 0, 5, 0}, {0, 5, 0, 0, 0}, {0, 0, 0, 0, 5}, {5, 0, 0, 0, 0}};
  SamplingConfig greedy;
  greedy.temperature = 0.0f;
  int calls = 0;
  auto sample = [&](int j) {
    ++calls;
    return sample_token(rows[static_cast<size_t>(j)], greedy, static_cast<uint64_t>(j)).token;
  };
  EXPECT_EQ(verify_drafts(std::vector<int32_t>{3, 1, 2}, sample), (std::vector<int32_t>{3, 1, 4}))
      << "two accepted, then the target's token at the mismatch";
  EXPECT_EQ(calls, 3);
  calls = 0;
  EXPECT_EQ(verify_drafts(std::vector<int32_t>{3, 1, 4}, sample), (std::vector<int32_t>{3, 1, 4, 0}))
      << "all accepted: the bonus token of the last row";
  EXPECT_EQ(calls, 4);
  calls = 0;
  EXPECT_EQ(verify_drafts(std::vector<int32_t>{2, 1, 4}, sample), (std::vector<int32_t>{3}))
      << "the first draft rejected: only the target's token, later rows unread";
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(verify_drafts(std::vector<int32_t>{}, sample), (std::vector<int32_t>{3})) << "no drafts: a plain decode";
}

// The rule with a point-mass drafter must accept draft d with probability p(d) and otherwise
// give a token from p without d, renormalised, so that the emitted token follows p exactly.
// An implementation that always accepts (or never) fails the acceptance check; one that
// resamples from p on rejection (and may return d again) fails the residual check.
TEST(VerifyDrafts, RejectionSamplingPreservesTheTargetDistribution) {
  const std::vector<float> row0 = {1.0f, 0.2f, 1.6f, -0.5f, 0.7f};
  const std::vector<float> row1 = {0.1f, 1.3f, -0.2f, 0.9f, 0.4f};  // the bonus row
  SamplingConfig cfg;
  cfg.temperature = 0.9f;
  const auto p0 = softmax(row0, cfg.temperature), p1 = softmax(row1, cfg.temperature);
  const int32_t d = 0;  // p0(d) ~ 0.26
  const int n = 40000;
  int accepted = 0;
  std::vector<int> first(5, 0), residual(5, 0), bonus(5, 0);
  for (int i = 0; i < n; ++i) {
    cfg.seed = 1000 + static_cast<uint64_t>(i);
    const auto out = verify_drafts(std::vector<int32_t>{d}, [&](int j) {
      return sample_token(j == 0 ? row0 : row1, cfg, 17 + static_cast<uint64_t>(j)).token;
    });
    ASSERT_GE(out.size(), 1u);
    ASSERT_LE(out.size(), 2u);
    ++first[static_cast<size_t>(out[0])];
    if (out.size() == 2) {
      ASSERT_EQ(out[0], d) << "a second token only after an accepted draft";
      ++accepted;
      ++bonus[static_cast<size_t>(out[1])];
    } else {
      ASSERT_NE(out[0], d) << "a rejected draft is never emitted";
      ++residual[static_cast<size_t>(out[0])];
    }
  }
  const double rate = static_cast<double>(accepted) / n;
  const double sigma = std::sqrt(p0[d] * (1 - p0[d]) / n);
  EXPECT_NEAR(rate, p0[d], 5 * sigma) << "acceptance probability is p(d)";
  std::vector<double> rest = p0;
  rest[d] = 0;
  for (double& x : rest) x /= 1 - p0[d];
  // 4 degrees of freedom at most; 0.1% critical values: 16.3 (3 df), 18.5 (4 df).
  EXPECT_LT(chi_square(residual, rest, n - accepted), 16.3) << "rejection draws from p without d";
  EXPECT_LT(chi_square(first, p0, n), 18.5) << "the emitted token follows p";
  EXPECT_LT(chi_square(bonus, p1, accepted), 18.5) << "the bonus token follows the last row";
}

TEST(VerifyDrafts, TheSameSeedGivesTheSameRunAndTheTokensOfPlainDecoding) {
  const std::vector<std::vector<float>> rows = {{1.0f, 0.9f, 0.8f}, {0.3f, 0.2f, 0.4f}, {0.5f, 0.5f, 0.1f}};
  SamplingConfig cfg;
  cfg.temperature = 1.0f;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    cfg.seed = seed;
    auto row = [&](int j) { return sample_token(rows[static_cast<size_t>(j)], cfg, 5 + static_cast<uint64_t>(j)).token; };
    // Drafts equal to what plain decoding draws are all accepted, and any run is a prefix of it.
    const std::vector<int32_t> plain = {row(0), row(1), row(2)};
    EXPECT_EQ(verify_drafts(std::span<const int32_t>(plain).first(2), row), plain);
    const std::vector<int32_t> other = {(plain[0] + 1) % 3, plain[1]};
    EXPECT_EQ(verify_drafts(other, row), std::vector<int32_t>{plain[0]});
  }
}

}  // namespace
}  // namespace brigade
