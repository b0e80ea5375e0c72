// BeamSearch over scripted next-token distributions, worked out by hand. What it is against
// transformers' generate(num_beams) on a real model is tests/actors/engine_beam_search_test.cpp.
#include "core/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace brigade {
namespace {

constexpr int kVocab = 8;
constexpr int32_t kEnd = 2;

// Next-token probabilities by prefix: the listed ones, the rest of the mass spread evenly over
// the other ids.
class ScriptedModel {
 public:
  void set(std::vector<int32_t> prefix, std::map<int32_t, double> probs) { script_[std::move(prefix)] = std::move(probs); }

  TokenCandidates candidates(const std::vector<int32_t>& prefix) const {
    std::vector<double> p(kVocab, 0.0);
    auto it = script_.find(prefix);
    double listed = 0.0;
    if (it != script_.end())
      for (const auto& [t, q] : it->second) {
        p[static_cast<size_t>(t)] = q;
        listed += q;
      }
    const int n_rest = kVocab - (it != script_.end() ? static_cast<int>(it->second.size()) : 0);
    for (int t = 0; t < kVocab; ++t)
      if (it == script_.end() || !it->second.count(t)) p[static_cast<size_t>(t)] = (1.0 - listed) / n_rest;
    TokenCandidates out;
    for (int t = 0; t < kVocab; ++t) out.emplace_back(t, static_cast<float>(std::log(p[static_cast<size_t>(t)])));
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    return out;
  }

 private:
  std::map<std::vector<int32_t>, std::map<int32_t, double>> script_;
};

std::vector<BeamHypothesis> run(const ScriptedModel& model, const BeamSearchConfig& config, int* steps = nullptr) {
  EXPECT_TRUE(BeamSearch::validate(config, kVocab).is_ok());
  BeamSearch search(config);
  int n = 0;
  while (!search.done()) {
    std::vector<TokenCandidates> tops;
    for (const BeamHypothesis& b : search.running()) {
      TokenCandidates c = model.candidates(b.tokens);
      c.resize(std::min<size_t>(c.size(), static_cast<size_t>(search.candidates_per_beam())));
      tops.push_back(std::move(c));
    }
    search.advance(tops);
    ++n;
  }
  if (steps) *steps = n;
  return search.take_results();
}

TEST(BeamSearch, KeepsTheLessLikelyFirstTokenThatLeadsSomewhereBetter) {
  // Greedy takes 0 (0.5) and then meets a flat 0.3; beam search keeps 1 (0.4), whose 3 is 0.9.
  ScriptedModel m;
  m.set({}, {{0, 0.5}, {1, 0.4}, {kEnd, 0.02}, {3, 0.02}});
  m.set({0}, {{0, 0.3}, {1, 0.3}, {3, 0.3}});
  m.set({1}, {{3, 0.9}});
  const auto got = run(m, {.beam_width = 2, .max_new_tokens = 2, .end_ids = {}});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].tokens, (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(got[0].cum_logprob, std::log(0.4) + std::log(0.9), 1e-6);
  EXPECT_NEAR(got[0].score, got[0].cum_logprob / 2, 1e-6);
  EXPECT_FALSE(got[0].ended_at_id);
  // Of 0's three equal continuations, the lowest id (the parent's first candidate) wins the tie.
  EXPECT_EQ(got[1].tokens, (std::vector<int32_t>{0, 0}));
  EXPECT_NEAR(got[1].logprobs[1], std::log(0.3), 1e-6);
}

TEST(BeamSearch, WidthOneWithoutEndIdsIsGreedy) {
  ScriptedModel m;
  m.set({}, {{5, 0.6}});
  m.set({5}, {{5, 0.1}, {4, 0.7}});
  m.set({5, 4}, {{1, 0.35}, {6, 0.34}});
  const auto got = run(m, {.beam_width = 1, .max_new_tokens = 4, .end_ids = {}});
  ASSERT_EQ(got.size(), 1u);
  // The last step is flat: ids 0.. share the rest of the mass, and the lowest id wins.
  EXPECT_EQ(got[0].tokens, (std::vector<int32_t>{5, 4, 1, 0}));
}

TEST(BeamSearch, AnEndIdOutsideTheFirstWidthCandidatesDoesNotFinish) {
  // Width 1: step 1's end id is the second candidate, so only the first (0) counts; the beam
  // runs on to the length limit although [end] alone would have scored better.
  ScriptedModel m;
  m.set({}, {{0, 0.6}, {kEnd, 0.39}});
  const auto got = run(m, {.beam_width = 1, .max_new_tokens = 2, .end_ids = {kEnd}});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].tokens.size(), 2u);
  EXPECT_EQ(got[0].tokens[0], 0);
  EXPECT_FALSE(got[0].ended_at_id);
}

// Width 2, end id 2, three steps at most. Step 1: [2] ends (0.4); 0 (0.35) and 1 (0.25) run.
// Step 2: [0 2] ends with score (ln .35 + ln .95) / 2 = -0.55, filling the finished set
// ([0 2], [2] at -0.92); [1 3] runs with (ln .25 + ln .999) / 2 = -0.69, better than the worst
// finished one. Step 3: [1 3 2] ends at -1.39 / 3 = -0.46, the best of all.
ScriptedModel late_winner() {
  ScriptedModel m;
  m.set({}, {{kEnd, 0.4}, {0, 0.35}, {1, 0.25 - 1e-6}});
  m.set({0}, {{kEnd, 0.95}});
  m.set({1}, {{3, 0.999}});
  m.set({1, 3}, {{kEnd, 0.999}});
  return m;
}

TEST(BeamSearch, TheHeuristicGoesOnWhileARunningBeamCanStillWin) {
  int steps = 0;
  const auto got = run(late_winner(), {.beam_width = 2, .max_new_tokens = 3, .end_ids = {kEnd}}, &steps);
  EXPECT_EQ(steps, 3);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].tokens, (std::vector<int32_t>{1, 3, kEnd}));
  EXPECT_TRUE(got[0].ended_at_id);
  EXPECT_NEAR(got[0].score, (std::log(0.25 - 1e-6) + 2 * std::log(0.999)) / 3, 1e-6);
  EXPECT_EQ(got[1].tokens, (std::vector<int32_t>{0, kEnd}));
}

TEST(BeamSearch, EarlyStoppingOnStopsOnceWidthBeamsFinished) {
  int steps = 0;
  const auto got = run(late_winner(),
                       {.beam_width = 2, .max_new_tokens = 3, .early_stopping = EarlyStopping::on, .end_ids = {kEnd}},
                       &steps);
  EXPECT_EQ(steps, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].tokens, (std::vector<int32_t>{0, kEnd}));
  EXPECT_EQ(got[1].tokens, (std::vector<int32_t>{kEnd}));
}

TEST(BeamSearch, NeverWithALengthPenaltyWeighsTheLongestPossibleBeam) {
  // Width 1: [2] ends first (-0.51). The heuristic compares the running [0] (-0.92 at length 1)
  // and stops; `never` divides by max_new_tokens (4) instead, goes on, and finds [0 1 1 1].
  ScriptedModel m;
  m.set({}, {{kEnd, 0.6}, {0, 0.4 - 1e-6}});
  for (std::vector<int32_t> p : {std::vector<int32_t>{0}, {0, 1}, {0, 1, 1}}) m.set(p, {{1, 0.99}});
  const auto heuristic = run(m, {.beam_width = 1, .max_new_tokens = 4, .end_ids = {kEnd}});
  ASSERT_EQ(heuristic.size(), 1u);
  EXPECT_EQ(heuristic[0].tokens, (std::vector<int32_t>{kEnd}));
  const auto never =
      run(m, {.beam_width = 1, .max_new_tokens = 4, .early_stopping = EarlyStopping::never, .end_ids = {kEnd}});
  ASSERT_EQ(never.size(), 1u);
  EXPECT_EQ(never[0].tokens, (std::vector<int32_t>{0, 1, 1, 1}));
  EXPECT_FALSE(never[0].ended_at_id);
  // length_penalty 0 makes the score the plain sum: [2] wins whatever the rule.
  const auto sum = run(m, {.beam_width = 1, .max_new_tokens = 4, .length_penalty = 0.0f,
                           .early_stopping = EarlyStopping::never, .end_ids = {kEnd}});
  EXPECT_EQ(sum[0].tokens, (std::vector<int32_t>{kEnd}));
}

TEST(BeamSearch, KeepsEachTokensCandidatesWhenAsked) {
  ScriptedModel m;
  m.set({}, {{4, 0.7}});
  const auto got = run(m, {.beam_width = 2, .max_new_tokens = 3, .end_ids = {}, .keep_top = true});
  ASSERT_EQ(got.size(), 2u);
  for (const auto& h : got) {
    ASSERT_EQ(h.top.size(), h.tokens.size());
    ASSERT_EQ(h.logprobs.size(), h.tokens.size());
    EXPECT_NEAR(std::accumulate(h.logprobs.begin(), h.logprobs.end(), 0.0), h.cum_logprob, 1e-6);
    for (size_t i = 0; i < h.tokens.size(); ++i) {
      ASSERT_EQ(h.top[i]->size(), 4u);  // K = 2 * width
      const auto chosen = std::find_if(h.top[i]->begin(), h.top[i]->end(),
                                       [&](const auto& c) { return c.first == h.tokens[i]; });
      ASSERT_NE(chosen, h.top[i]->end()) << "token " << i << " is among its step's candidates";
      EXPECT_EQ(chosen->second, h.logprobs[i]);
    }
  }
  const auto without = run(m, {.beam_width = 2, .max_new_tokens = 3, .end_ids = {}});
  EXPECT_TRUE(without[0].top.empty());
}

TEST(BeamSearch, RefusesConfigsItCannotRun) {
  EXPECT_FALSE(BeamSearch::validate({.beam_width = 0}, kVocab).is_ok());
  EXPECT_FALSE(BeamSearch::validate({.beam_width = 1, .max_new_tokens = 0}, kVocab).is_ok());
  EXPECT_FALSE(BeamSearch::validate({.length_penalty = NAN}, kVocab).is_ok());
  EXPECT_FALSE(BeamSearch::validate({.end_ids = {kVocab}}, kVocab).is_ok());
  EXPECT_FALSE(BeamSearch::validate({.end_ids = {1, 1}}, kVocab).is_ok());
  // Width 3 with 2 end ids keeps 9 candidates per beam: more than 8 ids.
  const Status s = BeamSearch::validate({.beam_width = 3, .end_ids = {1, 2}}, kVocab);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("vocabulary"), std::string::npos) << s.message();
  EXPECT_TRUE(BeamSearch::validate({.beam_width = 4, .end_ids = {1}}, kVocab).is_ok());
}

}  // namespace
}  // namespace brigade
