#include "actors/scheduler/policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;

SchedulerLimits limits() {
  SchedulerLimits l;
  l.max_running = 4;
  l.max_waiting = 3;
  l.max_step_tokens = 8;
  l.max_context = 64;
  l.page_size = 4;
  l.vocab_size = 100;
  return l;
}

SeqRequest req(uint64_t id, int n_prompt, int max_tokens, int priority = 0) {
  SeqRequest r;
  r.id = id;
  for (int i = 0; i < n_prompt; ++i) r.prompt.push_back(10 + i);
  r.max_tokens = max_tokens;
  r.eos_ids = {2};
  r.priority = priority;
  return r;
}

std::vector<SampledResult> sample_all(const PlannedStep& s, int32_t token) {
  std::vector<SampledResult> out;
  for (const auto& w : s.seqs)
    if (w.sample) out.push_back({w.seq_id, token, 0.0f});
  return out;
}

TEST(SchedulerPolicy, RejectsBadRequests) {
  SchedulerPolicy p(limits(), 100);
  EXPECT_EQ(p.add(req(1, 0, 4)).code(), StatusCode::invalid_argument);
  EXPECT_EQ(p.add(req(1, 4, 0)).code(), StatusCode::invalid_argument);
  EXPECT_EQ(p.add(req(1, 64, 4)).code(), StatusCode::invalid_argument) << "prompt fills the context";
  SeqRequest bad = req(1, 3, 4);
  bad.prompt[1] = 100;
  Status st = p.add(bad);
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("100"), std::string::npos);
  SchedulerPolicy tiny(limits(), 1);  // 4 token slots
  EXPECT_EQ(tiny.add(req(1, 4, 60)).code(), StatusCode::out_of_resources) << "prompt + 1 exceeds the pool";
  EXPECT_TRUE(tiny.add(req(1, 3, 60)).is_ok()) << "generation is bounded by the pool, not refused";
  EXPECT_FALSE(p.has_work());
}

TEST(SchedulerPolicy, BoundedQueue) {
  SchedulerPolicy p(limits(), 100);
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(p.add(req(i, 2, 2)).is_ok());
  EXPECT_EQ(p.add(req(4, 2, 2)).code(), StatusCode::out_of_resources);
  EXPECT_EQ(p.add(req(3, 2, 2)).code(), StatusCode::invalid_argument) << "id 3 is in use";
}

TEST(SchedulerPolicy, ChunkedPrefillBesideDecode) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(req(1, 3, 5)).is_ok());
  auto s1 = p.plan(pages);
  ASSERT_TRUE(s1);
  ASSERT_EQ(s1->seqs.size(), 1u);
  EXPECT_EQ(s1->seqs[0].tokens.size(), 3u);
  EXPECT_TRUE(s1->seqs[0].sample);
  auto ev = p.complete(s1->step_id, sample_all(*s1, 50), pages);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].new_tokens, std::vector<int32_t>{50});

  // A long prompt arrives: the next step decodes seq 1 and prefills a chunk of seq 2.
  ASSERT_TRUE(p.add(req(2, 20, 3)).is_ok());
  auto s2 = p.plan(pages);
  ASSERT_TRUE(s2);
  ASSERT_EQ(s2->seqs.size(), 2u);
  EXPECT_EQ(s2->seqs[0].seq_id, 1u);
  EXPECT_EQ(s2->seqs[0].tokens, std::vector<int32_t>{50});
  EXPECT_EQ(s2->seqs[0].start_pos, 3);
  EXPECT_EQ(s2->seqs[1].seq_id, 2u);
  EXPECT_EQ(s2->seqs[1].tokens.size(), 7u) << "budget 8 minus one decode token";
  EXPECT_FALSE(s2->seqs[1].sample) << "a partial prompt chunk does not sample";
  EXPECT_EQ(s2->n_tokens, 8);
  // Block tables cover exactly the positions the step touches.
  EXPECT_EQ(s2->seqs[1].block_table.size(), 2u);
}

TEST(SchedulerPolicy, FinishesOnEosLengthAndReleasesPages) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(req(1, 2, 3)).is_ok());
  ASSERT_TRUE(p.add(req(2, 2, 3)).is_ok());
  auto s = p.plan(pages);
  ASSERT_TRUE(s);
  EXPECT_LT(pages.n_available(), 100);
  std::vector<SampledResult> r = {{1, 2, 0.0f}, {2, 7, 0.0f}};  // seq 1 samples EOS
  auto ev = p.complete(s->step_id, r, pages);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].finish, Finish::stop);
  EXPECT_EQ(ev[1].finish, Finish::none);
  for (int i = 0; i < 2; ++i) {
    auto st = p.plan(pages);
    ASSERT_TRUE(st);
    ev = p.complete(st->step_id, sample_all(*st, 7), pages);
  }
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::length);
  EXPECT_EQ(ev[0].completion_tokens, 3);
  EXPECT_EQ(pages.n_available(), 100) << "every page is back";
  EXPECT_FALSE(p.has_work());
}

TEST(SchedulerPolicy, AdmissionWaitsForPagesInPriorityOrder) {
  SchedulerPolicy p(limits(), 4);
  PoolSource pages(4);  // 16 tokens
  ASSERT_TRUE(p.add(req(1, 8, 8)).is_ok());     // needs 3 pages (8 + 1 tokens)
  ASSERT_TRUE(p.add(req(2, 8, 4)).is_ok());     // needs 3 pages: must wait
  ASSERT_TRUE(p.add(req(3, 4, 4, 5)).is_ok());  // higher priority: goes first (2 pages)
  auto s = p.plan(pages);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->seqs.size(), 1u);
  EXPECT_EQ(s->seqs[0].seq_id, 3u) << "priority 5 first";
  EXPECT_EQ(p.n_waiting(), 2);
  EXPECT_EQ(p.pages_short(pages), 1) << "seq 1 needs 3 pages, 2 are free";
}

TEST(SchedulerPolicy, PreemptsTheLatestArrivalAndRecomputesIt) {
  SchedulerLimits l = limits();
  l.max_step_tokens = 64;
  SchedulerPolicy p(l, 4);
  PoolSource pages(4);  // 16 token slots, page size 4
  ASSERT_TRUE(p.add(req(1, 6, 20)).is_ok());
  ASSERT_TRUE(p.add(req(2, 6, 20)).is_ok());
  std::vector<int32_t> out1, out2;
  int steps = 0;
  bool preempted_seen = false;
  while (p.has_work() && steps < 200) {
    auto s = p.plan(pages);
    ASSERT_TRUE(s) << "some sequence can always run";
    ++steps;
    for (const auto& w : s->seqs) {
      // A recompute chunk of seq 2 replays its prompt and everything it generated so far.
      if (w.seq_id == 2 && w.start_pos == 0 && !out2.empty()) {
        preempted_seen = true;
        ASSERT_EQ(w.tokens.size(), 6 + out2.size());
        EXPECT_TRUE(std::equal(out2.begin(), out2.end(), w.tokens.begin() + 6));
      }
    }
    std::vector<SampledResult> r;
    for (const auto& w : s->seqs)
      if (w.sample) r.push_back({w.seq_id, static_cast<int32_t>(40 + w.start_pos), 0.0f, {}});
    for (const auto& ev : p.complete(s->step_id, r, pages)) {
      auto& out = ev.seq_id == 1 ? out1 : out2;
      out.insert(out.end(), ev.new_tokens.begin(), ev.new_tokens.end());
    }
  }
  EXPECT_TRUE(preempted_seen);
  EXPECT_GE(p.n_preemptions(), 1u);
  EXPECT_EQ(out1.size(), 10u) << "16 slots: prompt 6 + 10 generated ends at the pool's capacity";
  EXPECT_EQ(out2.size(), 10u);
  EXPECT_EQ(pages.n_available(), 4);
}

TEST(SchedulerPolicy, InFlightStepsReferToTheLastSampledToken) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(req(1, 3, 4)).is_ok());
  auto a = p.plan(pages);  // prefill, samples token 1
  ASSERT_TRUE(a);
  auto b = p.plan(pages);  // decode of the token step a is sampling
  ASSERT_TRUE(b);
  ASSERT_EQ(b->seqs.size(), 1u);
  EXPECT_TRUE(b->seqs[0].use_last_sampled);
  EXPECT_EQ(b->seqs[0].start_pos, 3);
  EXPECT_EQ(b->seqs[0].n_generated, 1u) << "draws the second token's random number";
  auto c = p.plan(pages);
  ASSERT_TRUE(c);
  auto d = p.plan(pages);  // tokens 1..4 are all in flight: max_tokens reached
  ASSERT_TRUE(d);
  EXPECT_FALSE(p.plan(pages)) << "no fifth token is scheduled for max_tokens 4";
  EXPECT_EQ(p.n_inflight(), 4);
  // EOS on the second token: the third and fourth come back and are dropped.
  std::vector<SeqEvent> all;
  for (auto [step, tok] : std::vector<std::pair<uint64_t, int32_t>>{{a->step_id, 9}, {b->step_id, 2},
                                                                     {c->step_id, 7}, {d->step_id, 8}}) {
    std::vector<SampledResult> r = {{1, tok, 0.0f, {}}};
    auto ev = p.complete(step, r, pages);
    all.insert(all.end(), ev.begin(), ev.end());
  }
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].new_tokens, std::vector<int32_t>{2});
  EXPECT_EQ(all[1].finish, Finish::stop);
  EXPECT_EQ(pages.n_available(), 100) << "pages return once the last step in flight is back";
  EXPECT_FALSE(p.has_work());
}

TEST(SchedulerPolicy, AbortWaitingAndInFlight) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(req(1, 2, 5)).is_ok());
  ASSERT_TRUE(p.add(req(2, 2, 5)).is_ok());
  auto s = p.plan(pages);
  ASSERT_TRUE(s);
  auto ev = p.abort(1, pages);
  EXPECT_TRUE(ev.empty()) << "in flight: ends when its step completes";
  ev = p.complete(s->step_id, sample_all(*s, 9), pages);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].finish, Finish::abort);
  EXPECT_EQ(ev[1].finish, Finish::none);
  ev = p.abort(2, pages);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::abort);
  EXPECT_EQ(pages.n_available(), 100);
  EXPECT_TRUE(p.abort(99, pages).empty());
  auto next = p.plan(pages);
  EXPECT_FALSE(next) << "nothing left to run";
}

TEST(SchedulerPolicy, StepFailureEndsItsSequences) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(req(1, 2, 5)).is_ok());
  auto s = p.plan(pages);
  ASSERT_TRUE(s);
  auto ev = p.fail(s->step_id, "boom", pages);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::error);
  EXPECT_EQ(ev[0].error, "boom");
  EXPECT_EQ(pages.n_available(), 100);
}

// A dead executor bounces the newer step first (it was sent after the death); the older step's
// error follows. Either order ends the sequences with the error and returns every page.
TEST(SchedulerPolicy, StepFailuresMayArriveOutOfOrder) {
  for (bool older_succeeds : {false, true}) {
    SchedulerPolicy p(limits(), 100);
    PoolSource pages(100);
    ASSERT_TRUE(p.add(req(1, 2, 5)).is_ok());
    ASSERT_TRUE(p.add(req(2, 3, 5)).is_ok());
    auto s1 = p.plan(pages);
    ASSERT_TRUE(s1);
    auto s2 = p.plan(pages);  // decodes fed by s1's tokens, planned while s1 runs
    ASSERT_TRUE(s2);
    EXPECT_EQ(p.n_inflight(), 2);
    auto ev = p.fail(s2->step_id, "gone", pages);
    EXPECT_TRUE(ev.empty()) << "the sequences still wait for s1";
    ev = older_succeeds ? p.complete(s1->step_id, sample_all(*s1, 9), pages) : p.fail(s1->step_id, "gone", pages);
    ASSERT_EQ(ev.size(), 2u);
    for (const auto& e : ev) {
      EXPECT_EQ(e.finish, Finish::error);
      EXPECT_EQ(e.error, "gone");
    }
    EXPECT_EQ(p.n_inflight(), 0);
    EXPECT_TRUE(p.fail(s1->step_id, "again", pages).empty()) << "an unknown step is ignored";
    EXPECT_EQ(pages.n_available(), 100);
  }
}

TEST(SchedulerPolicy, ContextLimitEndsWithLength) {
  SchedulerLimits l = limits();
  l.max_context = 6;
  SchedulerPolicy p(l, 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(req(1, 4, 100)).is_ok());
  std::vector<SeqEvent> ev;
  int steps = 0;
  while (auto s = p.plan(pages)) {
    ev = p.complete(s->step_id, sample_all(*s, 9), pages);
    ++steps;
  }
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::length);
  EXPECT_EQ(ev[0].completion_tokens, 2);
  EXPECT_EQ(steps, 2);
}

// Admit groups (a beam search's step): no member is admitted before the whole group has arrived,
// so the group runs in one step; a released group (its deadline passed) goes with what arrived.
// Sequences already running keep decoding while the group forms.
SeqRequest grouped(uint64_t id, uint64_t group, int size) {
  SeqRequest r = req(id, 2, 1);
  r.admit_group = group;
  r.admit_group_size = size;
  return r;
}

TEST(SchedulerPolicy, AnAdmitGroupIsPlannedInOneStep) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(req(9, 2, 3)).is_ok());
  auto s = p.plan(pages);
  ASSERT_TRUE(s.has_value());
  p.complete(s->step_id, sample_all(*s, 50), pages);  // 9 decodes from now on
  ASSERT_TRUE(p.add(grouped(1, 77, 3)).is_ok());
  EXPECT_EQ(p.take_opened_groups(), (std::vector<uint64_t>{77}));
  ASSERT_TRUE(p.add(grouped(2, 77, 3)).is_ok());
  EXPECT_TRUE(p.take_opened_groups().empty()) << "opened once";
  EXPECT_EQ(p.n_forming_groups(), 1);
  s = p.plan(pages);
  ASSERT_TRUE(s.has_value()) << "the running sequence decodes";
  ASSERT_EQ(s->seqs.size(), 1u);
  EXPECT_EQ(s->seqs[0].seq_id, 9u);
  EXPECT_EQ(p.n_waiting(), 2) << "the group waits for its third member";
  p.complete(s->step_id, sample_all(*s, 50), pages);
  ASSERT_TRUE(p.add(grouped(3, 77, 3)).is_ok());
  EXPECT_EQ(p.n_forming_groups(), 0);
  s = p.plan(pages);
  ASSERT_TRUE(s.has_value());
  std::vector<uint64_t> ids;
  for (const auto& w : s->seqs) ids.push_back(w.seq_id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3, 9})) << "the whole group in one step, beside the decode";
}

TEST(SchedulerPolicy, AReleasedGroupGoesWithWhatArrived) {
  SchedulerPolicy p(limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(grouped(1, 5, 3)).is_ok());
  ASSERT_TRUE(p.add(grouped(2, 5, 3)).is_ok());
  ASSERT_TRUE(p.add(req(3, 2, 1)).is_ok());  // behind the group: nothing overtakes it
  EXPECT_FALSE(p.plan(pages).has_value());
  p.release_group(5);  // its third member was refused on the way
  EXPECT_EQ(p.n_forming_groups(), 0);
  auto s = p.plan(pages);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->seqs.size(), 3u);
  // A late member of a released group does not wait either.
  p.complete(s->step_id, sample_all(*s, 50), pages);
  ASSERT_TRUE(p.add(grouped(4, 5, 3)).is_ok());
  s = p.plan(pages);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->seqs.size(), 1u);
  EXPECT_EQ(s->seqs[0].seq_id, 4u);
  // An aborted waiting member leaves the queue; the rest still wait for the group's deadline.
  ASSERT_TRUE(p.add(grouped(10, 6, 3)).is_ok());
  ASSERT_TRUE(p.add(grouped(11, 6, 3)).is_ok());
  EXPECT_EQ(p.abort(10, pages).size(), 1u);
  p.complete(s->step_id, sample_all(*s, 50), pages);
  EXPECT_FALSE(p.plan(pages).has_value());
  p.release_group(6);
  s = p.plan(pages);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->seqs.size(), 1u);
  EXPECT_EQ(s->seqs[0].seq_id, 11u);
  SeqRequest sizeless = grouped(12, 8, 0);
  EXPECT_EQ(p.add(sizeless).code(), StatusCode::invalid_argument);
}

// Fixed-grid images (LLaVA, Idefics3's tiles) are [3, S, S] pixels, S the tower's image_size even
// where it is not whole patches (SigLIP so400m/14 at 384 pixels: 27 x 27 patches of 14, the last 6
// pixels dropped by the convolution's stride), not the grid's patch rows; anything else is refused
// naming the shape.
TEST(SchedulerPolicy, FixedGridImagesAreSquarePixelsNotWholePatches) {
  SchedulerLimits l = limits();
  l.max_context = 1024;
  l.max_step_tokens = 1024;
  l.image_token = 50;
  l.image_merge = 3;  // SmolVLM2-2.2B's pixel shuffle: 81 tokens a tile
  l.image_grid = 27;
  l.image_size = 384;
  l.image_patch_width = 3 * 14 * 14;
  l.image_1d = true;
  SchedulerPolicy p(l, 1000);
  auto with_image = [](uint64_t id, size_t floats) {
    SeqRequest r = req(id, 2, 1);
    r.prompt.insert(r.prompt.begin() + 1, 81, 50);
    r.images.push_back({0, std::make_shared<const std::vector<float>>(floats, 0.5f), 27, 27});
    return r;
  };
  EXPECT_TRUE(p.add(with_image(1, size_t{3} * 384 * 384)).is_ok());
  const Status st = p.add(with_image(2, size_t{27} * 27 * 3 * 14 * 14));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("must be [3, 384, 384] pixels"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace brigade
