// ThinkingBudgets (actors/executor/thinking_budget.h): the count of a sequence's reasoning tokens
// and the tokens forced once its thinking_token_budget is spent, fed token by token as StepRunner
// feeds it. The engine-level behaviour is in engine_thinking_budget_test.cpp.
#include "actors/executor/thinking_budget.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace brigade {
namespace {

constexpr int32_t kOpen = 10, kClose = 11, kWord = 20, kBang = 21;

SamplingConfig budget(int n, int32_t start = -1, std::vector<int32_t> end = {kClose}) {
  SamplingConfig cfg;
  cfg.reasoning_end = kClose;
  cfg.reasoning_start = start;
  cfg.thinking_budget = n;
  cfg.thinking_end = std::move(end);
  return cfg;
}

// Feeds `tokens`, then returns what each next step is forced to, fed as it comes, until nothing is.
std::vector<int32_t> forced_after(ThinkingBudgets& b, const SamplingConfig& cfg, const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) {
    EXPECT_EQ(b.forced(1, cfg), std::nullopt) << "forced before the budget was spent";
    b.feed(1, cfg, t);
  }
  std::vector<int32_t> out;
  while (std::optional<int32_t> t = b.forced(1, cfg)) {
    out.push_back(*t);
    b.feed(1, cfg, *t);
    if (out.size() > 100) break;
  }
  return out;
}

TEST(ThinkingBudgets, TheCloseIsForcedOnceTheBudgetIsSpent) {
  ThinkingBudgets b;
  const SamplingConfig cfg = budget(3);
  EXPECT_EQ(forced_after(b, cfg, {kWord, kWord, kWord}), std::vector<int32_t>{kClose});
  b.feed(1, cfg, kWord);  // the answer: nothing more is forced, however long it runs
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(b.forced(1, cfg), std::nullopt);
    b.feed(1, cfg, kWord);
  }
}

TEST(ThinkingBudgets, ABudgetOfZeroClosesAtOnce) {
  ThinkingBudgets b;
  EXPECT_EQ(forced_after(b, budget(0), {}), std::vector<int32_t>{kClose});
}

TEST(ThinkingBudgets, ALongerCloseIsForcedTokenByToken) {
  ThinkingBudgets b;
  const SamplingConfig cfg = budget(2, -1, {kBang, kWord, kClose});
  EXPECT_EQ(forced_after(b, cfg, {kWord, kWord}), (std::vector<int32_t>{kBang, kWord, kClose}));
  ThinkingBudgets zero;  // the forced tokens are not counted as reasoning, even from a budget of 0
  EXPECT_EQ(forced_after(zero, budget(0, -1, {kBang, kWord, kClose}), {}), (std::vector<int32_t>{kBang, kWord, kClose}));
}

TEST(ThinkingBudgets, AClosedBlockIsNotCapped) {
  ThinkingBudgets b;
  EXPECT_TRUE(forced_after(b, budget(3), {kWord, kClose, kWord, kWord, kWord, kOpen, kWord, kWord, kWord}).empty());
}

TEST(ThinkingBudgets, WithAnOpeningTagOnlyTheFirstTokenOpensTheBlock) {
  ThinkingBudgets opened;
  EXPECT_EQ(forced_after(opened, budget(2, kOpen), {kOpen, kWord, kWord}), std::vector<int32_t>{kClose})
      << "the opening tag itself is not counted";
  ThinkingBudgets answered;
  EXPECT_TRUE(forced_after(answered, budget(2, kOpen), {kWord, kOpen, kWord, kWord, kWord}).empty())
      << "an answer first: a later tag opens nothing";
  ThinkingBudgets zero;
  EXPECT_EQ(forced_after(zero, budget(0, kOpen), {kOpen}), std::vector<int32_t>{kClose});
}

TEST(ThinkingBudgets, SequencesAreCountedApartAndReleased) {
  ThinkingBudgets b;
  const SamplingConfig cfg = budget(2);
  b.feed(1, cfg, kWord);
  b.feed(2, cfg, kWord);
  b.feed(2, cfg, kWord);
  EXPECT_EQ(b.forced(1, cfg), std::nullopt);
  EXPECT_EQ(b.forced(2, cfg), kClose);
  b.release(2);
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(b.forced(2, cfg), std::nullopt) << "released: a new sequence starts from nothing";
  SamplingConfig none = cfg;
  none.thinking_budget = -1;
  EXPECT_EQ(b.forced(1, none), std::nullopt);
}

}  // namespace
}  // namespace brigade
