// SchedulerPolicy under PD separation, without actors: the prefill side hands a sequence off after
// its first token (pages read, then freed or cached), the decode side admits a transferred
// sequence with reserved pages and decodes it once they are written; aborts at every stage, a
// full decode pool, malformed hand-offs.
#include <gtest/gtest.h>

#include <algorithm>

#include "actors/scheduler/policy.h"
#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;

SchedulerLimits pd_limits(PdRole role, bool radix = false) {
  SchedulerLimits l;
  l.max_running = 8;
  l.max_waiting = 16;
  l.max_step_tokens = 64;
  l.max_context = 256;
  l.page_size = 4;
  l.vocab_size = 1000;
  l.prefix_cache = radix;
  l.role = role;
  return l;
}

SeqRequest request(uint64_t id, int n_prompt, int max_tokens) {
  SeqRequest r;
  r.id = id;
  for (int i = 0; i < n_prompt; ++i) r.prompt.push_back(10 + i);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.7f;
  r.sampling.seed = 1234 + id;
  r.eos_ids = {2};
  return r;
}

// Completes every planned step, sampling `token` for each row that samples.
void run_steps(SchedulerPolicy& p, PageSource& pages, std::vector<SeqEvent>& events, int32_t token = 7) {
  for (int n = 0; n < 100; ++n) {
    auto s = p.plan(pages);
    if (!s) return;
    std::vector<SampledResult> r;
    for (const auto& w : s->seqs)
      if (w.sample) r.push_back({w.seq_id, token, 0.0f, {}});
    auto ev = p.complete(s->step_id, r, pages);
    events.insert(events.end(), ev.begin(), ev.end());
  }
}

std::vector<SampledResult> one(uint64_t seq) { return {SampledResult{seq, 7, 0.0f, {}}}; }

TEST(SchedulerPd, APrefillInstanceHandsOffAfterTheFirstTokenAndFreesItsPages) {
  SchedulerPolicy p(pd_limits(PdRole::prefill), 64);
  PoolSource pages(64);
  ASSERT_TRUE(p.add(request(1, 10, 8)).is_ok());
  std::vector<SeqEvent> events;
  run_steps(p, pages, events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].new_tokens, std::vector<int32_t>{7}) << "the prefill side streams the first token";
  EXPECT_EQ(events[0].finish, Finish::none);
  EXPECT_FALSE(p.plan(pages).has_value()) << "a prefill instance never decodes";
  auto ex = p.take_exports();
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].pages.size(), 3u) << "10 prompt positions: 3 pages of 4";
  EXPECT_TRUE(p.take_exports().empty()) << "each export is asked once";
  std::vector<SeqEvent> final_events;
  auto moved = p.exported(1, true, "", pages, final_events);
  ASSERT_TRUE(moved.has_value());
  EXPECT_TRUE(final_events.empty()) << "the decode instance sends the final event";
  EXPECT_EQ(moved->generated, std::vector<int32_t>{7});
  EXPECT_EQ(moved->n_kv_tokens, 10);
  EXPECT_EQ(moved->req.sampling.seed, 1235u);
  EXPECT_EQ(moved->req.max_tokens, 8);
  EXPECT_FALSE(p.has_work());
  EXPECT_EQ(pages.pool.n_free(), 64) << "pages go back once read";
  auto s = p.plan(pages);
  EXPECT_FALSE(s.has_value());
}

TEST(SchedulerPd, WithTheRadixCacheTheHandedOffPromptStaysCached) {
  SchedulerPolicy p(pd_limits(PdRole::prefill, /*radix=*/true), 64);
  PoolSource pages(64);
  ASSERT_TRUE(p.add(request(1, 10, 8)).is_ok());
  std::vector<SeqEvent> events;
  run_steps(p, pages, events);
  ASSERT_EQ(p.take_exports().size(), 1u);
  ASSERT_TRUE(p.exported(1, true, "", pages, events).has_value());
  EXPECT_EQ(p.cache_stats().cached_pages, 2) << "its 2 whole prompt pages";
  EXPECT_EQ(pages.pool.n_free(), 62);
  EXPECT_EQ(p.n_pages_held(), 2);
  EXPECT_EQ(p.cached_prefix(request(2, 10, 8).prompt), 8);
}

TEST(SchedulerPd, AFirstTokenThatEndsTheRequestIsNotHandedOff) {
  SchedulerPolicy p(pd_limits(PdRole::prefill), 64);
  PoolSource pages(64);
  SeqRequest one_token = request(1, 6, 1);  // max_tokens 1
  one_token.ignore_eos = true;
  ASSERT_TRUE(p.add(one_token).is_ok());
  ASSERT_TRUE(p.add(request(2, 6, 5)).is_ok());
  std::vector<SeqEvent> events;
  run_steps(p, pages, events, /*token=*/2);  // EOS for request 2
  EXPECT_TRUE(p.take_exports().empty());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].finish, Finish::length);
  EXPECT_EQ(events[1].finish, Finish::stop);
  EXPECT_EQ(pages.pool.n_free(), 64);
}

TEST(SchedulerPd, AbortOnThePrefillSideAtEveryStage) {
  SchedulerPolicy p(pd_limits(PdRole::prefill), 64);
  PoolSource pages(64);
  ASSERT_TRUE(p.add(request(1, 10, 8)).is_ok());
  auto waiting = p.abort(1, pages);  // waiting on prefill
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].finish, Finish::abort);

  ASSERT_TRUE(p.add(request(2, 10, 8)).is_ok());
  auto step = p.plan(pages);  // during prefill
  ASSERT_TRUE(step.has_value());
  EXPECT_TRUE(p.abort(2, pages).empty()) << "ends when its step comes back";
  auto done = p.complete(step->step_id, one(2), pages);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish, Finish::abort);
  EXPECT_TRUE(p.take_exports().empty());

  ASSERT_TRUE(p.add(request(3, 10, 8)).is_ok());  // while its pages are read
  std::vector<SeqEvent> events;
  run_steps(p, pages, events);
  ASSERT_EQ(p.take_exports().size(), 1u);
  EXPECT_TRUE(p.abort(3, pages).empty());
  std::vector<SeqEvent> final_events;
  EXPECT_FALSE(p.exported(3, true, "", pages, final_events).has_value()) << "an aborted sequence is not handed off";
  ASSERT_EQ(final_events.size(), 1u);
  EXPECT_EQ(final_events[0].finish, Finish::abort);
  EXPECT_EQ(pages.pool.n_free(), 64);
  EXPECT_FALSE(p.has_work());
}

TEST(SchedulerPd, AFailedExportEndsTheRequestWithTheError) {
  SchedulerPolicy p(pd_limits(PdRole::prefill), 64);
  PoolSource pages(64);
  ASSERT_TRUE(p.add(request(1, 10, 8)).is_ok());
  std::vector<SeqEvent> events;
  run_steps(p, pages, events);
  ASSERT_EQ(p.take_exports().size(), 1u);
  std::vector<SeqEvent> final_events;
  EXPECT_FALSE(p.exported(1, false, "page 3 unreadable", pages, final_events).has_value());
  ASSERT_EQ(final_events.size(), 1u);
  EXPECT_EQ(final_events[0].finish, Finish::error);
  EXPECT_NE(final_events[0].error.find("page 3 unreadable"), std::string::npos);
  EXPECT_EQ(pages.pool.n_free(), 64);
}

TransferredSeq transferred(uint64_t id, int n_prompt, int max_tokens) {
  TransferredSeq t{request(id, n_prompt, max_tokens), {7}, n_prompt};
  return t;
}

TEST(SchedulerPd, TheDecodeSideDecodesOnlyOnceItsPagesAreWritten) {
  SchedulerPolicy p(pd_limits(PdRole::decode), 64);
  PoolSource pages(64);
  ASSERT_TRUE(p.add(request(9, 4, 20)).is_ok());  // a running sequence that must not wait
  std::vector<SeqEvent> events;
  auto first = p.plan(pages);
  ASSERT_TRUE(first.has_value());
  p.complete(first->step_id, one(9), pages);
  ASSERT_TRUE(p.add_transferred(transferred(1, 10, 8)).is_ok());
  auto step = p.plan(pages);
  ASSERT_TRUE(step.has_value());
  ASSERT_EQ(step->seqs.size(), 1u) << "the running sequence decodes while the pages are on their way";
  EXPECT_EQ(step->seqs[0].seq_id, 9u);
  auto imports = p.take_imports();
  ASSERT_EQ(imports.size(), 1u);
  EXPECT_EQ(imports[0].pages.size(), 3u);
  p.complete(step->step_id, one(9), pages);
  EXPECT_TRUE(p.imported(1, true, pages).empty());
  auto next = p.plan(pages);
  ASSERT_TRUE(next.has_value());
  const auto it = std::find_if(next->seqs.begin(), next->seqs.end(), [](const SeqWorkItem& w) { return w.seq_id == 1; });
  ASSERT_NE(it, next->seqs.end());
  EXPECT_EQ(it->tokens, std::vector<int32_t>{7}) << "it decodes from its first token";
  EXPECT_EQ(it->start_pos, 10) << "after the transferred prompt";
  EXPECT_EQ(it->n_generated, 1u) << "the seeded stream continues at its second token";
  EXPECT_EQ(it->sampling.seed, 1235u);
  EXPECT_EQ(std::vector<int32_t>(it->block_table.begin(), it->block_table.begin() + 3), imports[0].pages);
}

TEST(SchedulerPd, AFullDecodePoolQueuesTheHandOffUntilPagesFree) {
  SchedulerPolicy p(pd_limits(PdRole::decode), 6);
  PoolSource pages(6);
  ASSERT_TRUE(p.add_transferred(transferred(1, 15, 3)).is_ok());  // 16 + 1 positions: 5 pages
  ASSERT_TRUE(p.add_transferred(transferred(2, 15, 3)).is_ok());
  p.plan(pages);
  auto imports = p.take_imports();
  ASSERT_EQ(imports.size(), 1u) << "the second waits for pages";
  EXPECT_EQ(p.n_waiting(), 1);
  p.imported(1, true, pages);
  std::vector<SeqEvent> events;
  run_steps(p, pages, events);
  ASSERT_EQ(p.take_imports().size(), 1u) << "admitted once the first one's pages came back";
  p.imported(2, true, pages);
  run_steps(p, pages, events);
  EXPECT_FALSE(p.has_work());
  EXPECT_EQ(pages.pool.n_free(), 6);
  int n_final = 0;
  for (const auto& ev : events) n_final += ev.finish == Finish::length;
  EXPECT_EQ(n_final, 2);
}

TEST(SchedulerPd, AbortOnTheDecodeSideAtEveryStage) {
  SchedulerPolicy p(pd_limits(PdRole::decode), 64);
  PoolSource pages(64);
  ASSERT_TRUE(p.add_transferred(transferred(1, 10, 8)).is_ok());
  auto queued = p.abort(1, pages);  // queued for pages
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].finish, Finish::abort);
  EXPECT_EQ(queued[0].completion_tokens, 1);

  ASSERT_TRUE(p.add_transferred(transferred(2, 10, 8)).is_ok());  // pages being written
  p.plan(pages);
  ASSERT_EQ(p.take_imports().size(), 1u);
  EXPECT_TRUE(p.abort(2, pages).empty()) << "its pages are written into: it ends when that is done";
  auto done = p.imported(2, true, pages);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish, Finish::abort);

  ASSERT_TRUE(p.add_transferred(transferred(3, 10, 8)).is_ok());  // decoding
  p.plan(pages);
  p.take_imports();
  p.imported(3, true, pages);
  auto step = p.plan(pages);
  ASSERT_TRUE(step.has_value());
  EXPECT_TRUE(p.abort(3, pages).empty());
  auto last = p.complete(step->step_id, one(3), pages);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].finish, Finish::abort);
  EXPECT_FALSE(p.has_work());
  EXPECT_EQ(pages.pool.n_free(), 64);
}

TEST(SchedulerPd, AFailedImportRecomputesTheSequenceHere) {
  SchedulerPolicy p(pd_limits(PdRole::decode), 64);
  PoolSource pages(64);
  ASSERT_TRUE(p.add_transferred(transferred(1, 10, 3)).is_ok());
  p.plan(pages);
  ASSERT_EQ(p.take_imports().size(), 1u);
  p.imported(1, false, pages);
  auto step = p.plan(pages);
  ASSERT_TRUE(step.has_value());
  ASSERT_EQ(step->seqs.size(), 1u);
  EXPECT_EQ(step->seqs[0].start_pos, 0);
  EXPECT_EQ(step->seqs[0].tokens.size(), 11u) << "prompt + first token, recomputed";
  EXPECT_TRUE(step->seqs[0].sample);
  EXPECT_EQ(step->seqs[0].n_generated, 1u);
}

TEST(SchedulerPd, MalformedHandOffsAreRefusedWithTheReason) {
  SchedulerPolicy p(pd_limits(PdRole::decode), 4);
  auto no_token = transferred(1, 10, 8);
  no_token.generated.clear();
  EXPECT_EQ(p.add_transferred(no_token).code(), StatusCode::invalid_argument);
  auto bad_kv = transferred(2, 10, 8);
  bad_kv.n_kv_tokens = 4;
  EXPECT_NE(p.add_transferred(bad_kv).message().find("all but the last"), std::string::npos);
  auto bad_id = transferred(3, 10, 8);
  bad_id.generated = {5000};
  EXPECT_NE(p.add_transferred(bad_id).message().find("vocabulary"), std::string::npos);
  auto done = transferred(4, 10, 1);
  EXPECT_EQ(p.add_transferred(done).code(), StatusCode::invalid_argument);
  auto too_long = transferred(5, 20, 8);  // 21 tokens + 1 > 4 pages x 4
  EXPECT_EQ(p.add_transferred(too_long).code(), StatusCode::out_of_resources);
  ASSERT_TRUE(p.add_transferred(transferred(6, 10, 8)).is_ok());
  EXPECT_NE(p.add_transferred(transferred(6, 10, 8)).message().find("already in use"), std::string::npos);
}

}  // namespace
}  // namespace brigade
