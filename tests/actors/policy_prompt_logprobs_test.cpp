// SchedulerPolicy's prompt logprobs: which positions each chunk asks for, the runs coming back
// (once per position, in order, all in the first event), max_tokens 0, the prefix cache limit,
// preemption mid-prompt, and a run the plan did not ask for.
#include "actors/scheduler/policy.h"

#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;

SchedulerLimits limits(bool cache = false) { return testing::chunked_limits(64, cache); }

SeqRequest scored(uint64_t id, int n_prompt, int max_tokens, int k = 2) {
  SeqRequest r;
  r.id = id;
  for (int i = 0; i < n_prompt; ++i) r.prompt.push_back(10 + i);
  r.max_tokens = max_tokens;
  r.eos_ids = {2};
  r.prompt_logprobs = k;
  return r;
}

// What an executor would report for the step: for each item that asks, its positions, each
// entry's logprob = -position (so order and identity are visible), and a sampled token.
void answer(const PlannedStep& step, std::vector<SampledResult>& sampled, std::vector<PromptLogprobRun>& runs) {
  for (const SeqWorkItem& w : step.seqs) {
    if (w.sample) sampled.push_back({w.seq_id, 50, -0.1f, {}});
    if (w.prompt_logprobs < 0) continue;
    const int first = std::max(w.prompt_lp_from, w.start_pos + 1);
    const int last = std::min(w.start_pos + static_cast<int>(w.tokens.size()), w.prompt_len - 1);
    PromptLogprobRun run{w.seq_id, first, {}};
    for (int q = first; q <= last; ++q) {
      const int32_t tok = q - w.start_pos < static_cast<int>(w.tokens.size()) ? w.tokens[static_cast<size_t>(q - w.start_pos)]
                                                                              : w.next_token;
      run.entries.push_back({tok, -static_cast<float>(q), 1, {}});
    }
    runs.push_back(std::move(run));
  }
}

std::vector<SeqEvent> answer_and_complete(SchedulerPolicy& p, const PlannedStep& step, PoolSource& pages) {
  std::vector<SampledResult> sampled;
  std::vector<PromptLogprobRun> runs;
  answer(step, sampled, runs);
  return p.complete(step.step_id, sampled, pages, runs);
}

std::vector<SeqEvent> step_once(SchedulerPolicy& p, PoolSource& pages) {
  auto step = p.plan(pages);
  return step ? answer_and_complete(p, *step, pages) : std::vector<SeqEvent>{};
}

void expect_prompt(const std::vector<TokenLogprobEntry>& got, int n_prompt) {
  ASSERT_EQ(got.size(), static_cast<size_t>(n_prompt));
  EXPECT_EQ(got[0].token, 10);
  EXPECT_EQ(got[0].rank, 0) << "the first prompt token has no logprob";
  for (int q = 1; q < n_prompt; ++q) {
    EXPECT_EQ(got[static_cast<size_t>(q)].token, 10 + q) << q;
    EXPECT_EQ(got[static_cast<size_t>(q)].logprob, -static_cast<float>(q)) << "position " << q << " once, in order";
  }
}

TEST(SchedulerPromptLogprobs, ChunksAskForTheirPositionsAndTheFirstEventCarriesThemAll) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(scored(1, 10, 2)).is_ok());
  auto step = p.plan(pages);
  ASSERT_TRUE(step);
  ASSERT_EQ(step->seqs.size(), 1u);
  const SeqWorkItem& w = step->seqs[0];
  EXPECT_EQ(w.prompt_logprobs, 2);
  EXPECT_EQ(w.prompt_lp_from, 1);
  EXPECT_EQ(w.next_token, 14) << "the first token of the next chunk, scored by this one's last row";
  EXPECT_TRUE(answer_and_complete(p, *step, pages).empty()) << "no event before the first token";
  std::vector<SeqEvent> events;
  for (int i = 0; i < 6 && p.has_work(); ++i) {
    auto evs = step_once(p, pages);
    events.insert(events.end(), evs.begin(), evs.end());
  }
  ASSERT_EQ(events.size(), 2u);
  expect_prompt(events[0].prompt_logprobs, 10);
  EXPECT_EQ(events[0].new_tokens.size(), 1u);
  EXPECT_TRUE(events[1].prompt_logprobs.empty());
  EXPECT_EQ(events[1].finish, Finish::length);
}

TEST(SchedulerPromptLogprobs, MaxTokensZeroRunsThePromptOnly) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  SeqRequest plain = scored(1, 5, 0);
  plain.prompt_logprobs = -1;
  EXPECT_EQ(p.add(plain).code(), StatusCode::invalid_argument) << "nothing to do";
  ASSERT_TRUE(p.add(scored(1, 5, 0)).is_ok());
  std::vector<SeqEvent> events;
  for (int i = 0; i < 4 && p.has_work(); ++i) {
    auto step = p.plan(pages);
    ASSERT_TRUE(step);
    for (const auto& w : step->seqs) EXPECT_FALSE(w.sample) << "max_tokens 0 samples nothing";
    auto evs = answer_and_complete(p, *step, pages);
    events.insert(events.end(), evs.begin(), evs.end());
  }
  EXPECT_FALSE(p.has_work());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].finish, Finish::length);
  EXPECT_EQ(events[0].completion_tokens, 0);
  expect_prompt(events[0].prompt_logprobs, 5);
  EXPECT_EQ(pages.n_available(), 100) << "its pages went back";
}

// The prompt is cached (an earlier request computed it), but a request that needs prompt
// logprobs starts at position 0; one that has them all may use the cache again.
TEST(SchedulerPromptLogprobs, TheCacheServesOnlyScoredPositions) {
  SchedulerPolicy p(limits(/*cache=*/true), 100);
  PoolSource pages(100);
  SeqRequest plain = scored(1, 10, 1);
  plain.prompt_logprobs = -1;
  ASSERT_TRUE(p.add(plain).is_ok());
  while (p.has_work()) step_once(p, pages);
  ASSERT_EQ(p.cached_prefix(plain.prompt), 8);
  ASSERT_TRUE(p.add(scored(2, 10, 1)).is_ok());
  auto step = p.plan(pages);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->seqs[0].start_pos, 0) << "no logits for cached positions: recompute";
  EXPECT_EQ(p.cache_stats().hit_tokens, 0u);
}

// With HiCache tiers below the device, a plain request asks them for its prompt's pages; one
// that needs prompt logprobs does not (loaded pages have no logits either).
TEST(SchedulerPromptLogprobs, NoLowerTierLoadsForAPromptBeingScored) {
  SchedulerLimits l = limits(/*cache=*/true);
  l.lower_tiers = true;
  SchedulerPolicy p(l, 100);
  PoolSource pages(100);
  SeqRequest plain = scored(1, 10, 1);
  plain.prompt_logprobs = -1;
  ASSERT_TRUE(p.add(plain).is_ok());
  ASSERT_TRUE(p.add(scored(2, 10, 1)).is_ok());
  p.plan(pages);
  const auto loads = p.take_loads();
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(loads[0].seq_id, 1u) << "only the plain request asks the tiers";
}

// Preempted mid-prompt (its pages taken by an older sequence's growth): the recompute asks only
// for the positions not scored yet, and the event still has each once.
TEST(SchedulerPromptLogprobs, PreemptionMidPromptScoresEachPositionOnce) {
  SchedulerLimits l = limits();
  l.max_step_tokens = 8;
  SchedulerPolicy p(l, 6);  // 24 slots
  PoolSource pages(6);
  SeqRequest older = scored(1, 3, 20);
  older.prompt_logprobs = -1;
  ASSERT_TRUE(p.add(older).is_ok());
  ASSERT_TRUE(p.add(scored(2, 16, 1)).is_ok());
  std::vector<SeqEvent> events;
  bool asked_again = false;
  for (int i = 0; i < 80 && p.has_work(); ++i) {
    auto step = p.plan(pages);
    if (!step) break;
    for (const auto& w : step->seqs) {
      if (w.seq_id == 2 && w.prompt_logprobs >= 0 && w.start_pos + 1 < w.prompt_lp_from) asked_again = true;
    }
    for (auto& ev : answer_and_complete(p, *step, pages))
      if (ev.seq_id == 2) events.push_back(ev);
  }
  EXPECT_GT(p.n_preemptions(), 0u);
  EXPECT_TRUE(asked_again) << "a recomputed chunk over scored positions asks only from the first unscored one";
  ASSERT_FALSE(events.empty());
  expect_prompt(events[0].prompt_logprobs, 16);
  for (size_t i = 1; i < events.size(); ++i) EXPECT_TRUE(events[i].prompt_logprobs.empty());
}

TEST(SchedulerPromptLogprobs, ARunForOtherPositionsIsAnError) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(scored(1, 10, 2)).is_ok());
  auto step = p.plan(pages);
  ASSERT_TRUE(step);
  std::vector<PromptLogprobRun> runs = {{1, 2, {{11, -1.0f, 1, {}}}}};
  auto events = p.complete(step->step_id, {}, pages, runs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].finish, Finish::error);
  EXPECT_NE(events[0].error.find("prompt logprobs"), std::string::npos) << events[0].error;
}

}  // namespace
}  // namespace brigade
