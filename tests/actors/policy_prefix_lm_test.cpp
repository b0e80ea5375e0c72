// SchedulerPolicy for a model whose prompt attends to all of itself (PaliGemma,
// SchedulerLimits::prompt_whole): a prompt runs whole in one step from position 0 or waits for
// room, a prompt no step can hold is refused at submission, one longer than the sliding window
// (prompt_alone_beyond) runs alone in its step,
// the prefix cache never serves one, and a recomputed sequence's first chunk ends at its prompt's
// end so that what it generated is read causally again.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "actors/scheduler/policy.h"
#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;
using testing::prompt_req;
using testing::range;
using testing::sample_by_position;

// alone_beyond: SchedulerLimits::prompt_alone_beyond (the sliding window of PaliGemma 2).
SchedulerLimits whole_limits(int alone_beyond = 0) {
  SchedulerLimits l;
  l.max_running = 4;
  l.max_waiting = 8;
  l.max_step_tokens = 8;
  l.max_context = 64;
  l.page_size = 4;
  l.vocab_size = 1000;
  l.prompt_whole = true;
  l.prompt_alone_beyond = alone_beyond;
  return l;
}

TEST(SchedulerPolicyPrefixLm, APromptNoStepHoldsIsRefusedNamingTheBound) {
  SchedulerPolicy p(whole_limits(), 100);
  EXPECT_TRUE(p.add(prompt_req(1, range(10, 8), 4)).is_ok());
  const Status st = p.add(prompt_req(2, range(10, 9), 4));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("max_step_tokens"), std::string::npos) << st.message();
  SchedulerPolicy windowed(whole_limits(6), 100);
  EXPECT_TRUE(windowed.add(prompt_req(3, range(10, 8), 4)).is_ok()) << "longer than the window: it runs alone";
}

// With a window of 5 (prompt_alone_beyond), seq 2's prompt of 6 runs alone in its step: beside
// seq 1's decode it waits a step, then goes with nothing beside it (the model drops the sliding
// window for that step, which no other row may need). A prompt within the window (seq 3's 5)
// runs beside the decodes.
TEST(SchedulerPolicyPrefixLm, APromptLongerThanTheWindowRunsAlone) {
  SchedulerPolicy p(whole_limits(5), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 1), 20)).is_ok());
  auto s1 = p.plan(pages);
  ASSERT_TRUE(s1);
  p.complete(s1->step_id, sample_by_position(*s1), pages);
  ASSERT_TRUE(p.add(prompt_req(2, range(100, 6), 3)).is_ok());
  int alone_at = -1;
  for (int step = 0; step < 6; ++step) {
    auto s = p.plan(pages);
    ASSERT_TRUE(s);
    for (const auto& w : s->seqs)
      if (w.seq_id == 2 && w.start_pos == 0) {
        alone_at = step;
        EXPECT_EQ(w.tokens.size(), 6u);
        EXPECT_EQ(s->seqs.size(), 1u) << "alone in its step";
      }
    p.complete(s->step_id, sample_by_position(*s), pages);
  }
  EXPECT_EQ(alone_at, 1) << "beside seq 1's decode first, so it waited one step";
  ASSERT_TRUE(p.add(prompt_req(3, range(200, 5), 2)).is_ok());
  auto s = p.plan(pages);
  ASSERT_TRUE(s);
  bool beside = false;
  for (const auto& w : s->seqs) beside = beside || (w.seq_id == 3 && w.start_pos == 0 && s->seqs.size() > 1);
  EXPECT_TRUE(beside) << "a prompt within the window joins the decodes";
  // Without chunked prefill (prompts first, then a step of their own) it still runs alone.
  SchedulerLimits l = whole_limits(5);
  l.chunked_prefill = false;
  SchedulerPolicy q(l, 100);
  ASSERT_TRUE(q.add(prompt_req(4, range(10, 3), 2)).is_ok());
  ASSERT_TRUE(q.add(prompt_req(5, range(100, 6), 2)).is_ok());
  auto t1 = q.plan(pages);
  ASSERT_TRUE(t1);
  ASSERT_EQ(t1->seqs.size(), 1u);
  EXPECT_EQ(t1->seqs[0].seq_id, 4u);
  q.complete(t1->step_id, sample_by_position(*t1), pages);
  auto t2 = q.plan(pages);
  ASSERT_TRUE(t2);
  ASSERT_EQ(t2->seqs.size(), 1u) << "the long prompt alone";
  EXPECT_EQ(t2->seqs[0].seq_id, 5u);
}

// Seq 1 decodes (a token a step); seq 2's prompt of 8 does not fit the 7 left beside it, so it
// waits a step, whole, then runs in one step from position 0, before (here: instead of) seq 1's
// decode. Without prompt_whole it would be chunked at once.
TEST(SchedulerPolicyPrefixLm, APromptRunsWholeOrWaits) {
  SchedulerPolicy p(whole_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 3), 3)).is_ok());
  auto s1 = p.plan(pages);
  ASSERT_TRUE(s1);
  p.complete(s1->step_id, sample_by_position(*s1), pages);
  ASSERT_TRUE(p.add(prompt_req(2, range(100, 8), 2)).is_ok());
  bool ran_whole = false;
  for (int steps = 0; p.has_work() && steps < 50; ++steps) {
    auto s = p.plan(pages);
    ASSERT_TRUE(s);
    for (const auto& w : s->seqs)
      if (w.seq_id == 2 && w.start_pos == 0) {
        EXPECT_EQ(w.tokens.size(), 8u) << "the prompt whole";
        EXPECT_EQ(steps, 1) << "after one step without room";
        EXPECT_EQ(s->seqs.size(), 1u) << "it fills the step: seq 1's decode waits";
        ran_whole = true;
      } else if (w.seq_id == 2) {
        EXPECT_EQ(w.tokens.size(), 1u) << "then decodes";
      }
    p.complete(s->step_id, sample_by_position(*s), pages);
  }
  EXPECT_TRUE(ran_whole);
  SchedulerLimits chunked = whole_limits();
  chunked.prompt_whole = false;
  SchedulerPolicy q(chunked, 100);
  ASSERT_TRUE(q.add(prompt_req(1, range(10, 3), 3)).is_ok());
  auto t1 = q.plan(pages);
  q.complete(t1->step_id, sample_by_position(*t1), pages);
  ASSERT_TRUE(q.add(prompt_req(2, range(100, 8), 2)).is_ok());
  auto t2 = q.plan(pages);
  ASSERT_TRUE(t2);
  ASSERT_EQ(t2->seqs.size(), 2u);
  EXPECT_EQ(t2->seqs[1].tokens.size(), 7u) << "without prompt_whole: a chunk of what is left";
}

// The same prompt twice: the second computes it again from position 0 (its KV depends on the
// whole prompt, so no cached prefix serves it); the cache serves a causal model's.
TEST(SchedulerPolicyPrefixLm, ThePrefixCacheNeverServesAPrompt) {
  for (const bool whole : {true, false}) {
    SchedulerLimits l = whole_limits();
    l.prompt_whole = whole;
    l.prefix_cache = true;
    SchedulerPolicy p(l, 64, root_key("m"));
    PoolSource pages(64);
    int second_start = -1;
    for (uint64_t id : {1, 2}) {
      ASSERT_TRUE(p.add(prompt_req(id, range(10, 8), 2)).is_ok());
      for (int steps = 0; p.has_work() && steps < 50; ++steps) {
        auto s = p.plan(pages);
        ASSERT_TRUE(s);
        for (const auto& w : s->seqs)
          if (w.seq_id == 2 && second_start < 0) second_start = w.start_pos;
        p.complete(s->step_id, sample_by_position(*s), pages);
      }
    }
    EXPECT_EQ(second_start, whole ? 0 : 4) << (whole ? "prompt_whole" : "causal: a page from the cache");
  }
}

// With the lower tiers on, a causal model's new prompt first asks them for its pages; a whole
// prompt never does (a page from another prompt holds KV that saw that prompt), and runs at once.
TEST(SchedulerPolicyPrefixLm, NoLowerTierLoadServesAPrompt) {
  for (const bool whole : {true, false}) {
    SchedulerLimits l = whole_limits();
    l.max_step_tokens = 16;
    l.prompt_whole = whole;
    l.prefix_cache = true;
    l.lower_tiers = true;
    SchedulerPolicy p(l, 64, root_key("m"));
    PoolSource pages(64);
    ASSERT_TRUE(p.add(prompt_req(1, range(10, 14), 2)).is_ok());
    auto s = p.plan(pages);
    EXPECT_EQ(p.take_loads().size(), whole ? 0u : 1u);
    if (whole) {
      ASSERT_TRUE(s);
      EXPECT_EQ(s->seqs.at(0).start_pos, 0);
      EXPECT_EQ(s->seqs.at(0).tokens.size(), 14u);
    } else {
      EXPECT_FALSE(s) << "the causal prompt waits for its load";
    }
  }
}

// Two sequences in a pool too small for both: the later is preempted and recomputed. Its first
// recompute chunk is its prompt alone (from position 0), what it had generated comes after.
TEST(SchedulerPolicyPrefixLm, ARecomputedSequencesFirstChunkEndsAtItsPrompt) {
  SchedulerLimits l = whole_limits();
  l.max_step_tokens = 64;
  SchedulerPolicy p(l, 4);
  PoolSource pages(4);  // 16 token slots, pages of 4
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 6), 10)).is_ok());
  ASSERT_TRUE(p.add(prompt_req(2, range(30, 6), 10)).is_ok());
  std::vector<int32_t> out2;
  bool recomputed = false, replayed = false;
  for (int steps = 0; p.has_work() && steps < 200; ++steps) {
    auto s = p.plan(pages);
    ASSERT_TRUE(s);
    for (const auto& w : s->seqs) {
      if (w.seq_id != 2) continue;
      if (w.start_pos == 0 && !out2.empty()) {
        recomputed = true;
        EXPECT_EQ(w.tokens, range(30, 6)) << "the prompt alone";
      } else if (recomputed && w.start_pos == 6 && w.tokens.size() > 1) {
        replayed = true;  // the generated tokens replayed after it
        EXPECT_TRUE(std::equal(w.tokens.begin(), w.tokens.end(), out2.begin()));
      }
    }
    for (const auto& ev : p.complete(s->step_id, sample_by_position(*s), pages))
      if (ev.seq_id == 2) out2.insert(out2.end(), ev.new_tokens.begin(), ev.new_tokens.end());
  }
  EXPECT_TRUE(recomputed);
  EXPECT_TRUE(replayed);
  EXPECT_GE(p.n_preemptions(), 1u);
}

}  // namespace
}  // namespace brigade
