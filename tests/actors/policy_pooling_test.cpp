// SchedulerPolicy's pooling requests: chunks beside decodes that never sample, the embedding in
// the final event, pages given back, the prefix cache taken by last pooling only, a prompt as
// long as the context, and an executor that forgets the embedding.
#include "actors/scheduler/policy.h"

#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;

SchedulerLimits limits(bool cache = false) { return testing::chunked_limits(16, cache); }

SeqRequest pooled(uint64_t id, int n_prompt, Pooling p) {
  SeqRequest r;
  r.id = id;
  for (int i = 0; i < n_prompt; ++i) r.prompt.push_back(10 + i);
  r.max_tokens = 0;
  r.eos_ids = {2};
  r.pooling = p;
  return r;
}

// An executor's answer: a token for each sampling item, and for each pooling item that ends its
// prompt the vector [seq id, prompt length].
std::vector<SeqEvent> run_step(SchedulerPolicy& p, PoolSource& pages, std::vector<SeqWorkItem>* seen = nullptr,
                               bool forget_embeddings = false) {
  auto step = p.plan(pages);
  if (!step) return {};
  std::vector<SampledResult> sampled;
  std::vector<PooledEmbedding> embeddings;
  for (const SeqWorkItem& w : step->seqs) {
    if (seen) seen->push_back(w);
    if (w.sample) sampled.push_back({w.seq_id, 50, 0.0f, {}});
    if (w.pooling != Pooling::none && w.start_pos + static_cast<int>(w.tokens.size()) == w.prompt_len && !forget_embeddings)
      embeddings.push_back({w.seq_id, {static_cast<float>(w.seq_id), static_cast<float>(w.prompt_len)}});
  }
  return p.complete(step->step_id, sampled, pages, {}, embeddings);
}

TEST(SchedulerPooling, ChunksNeverSampleAndTheFinalEventCarriesTheEmbedding) {
  SchedulerPolicy p(limits(), 64);
  PoolSource pages(64);
  SeqRequest gen = pooled(1, 3, Pooling::none);
  gen.max_tokens = 6;
  ASSERT_TRUE(p.add(gen).is_ok());
  ASSERT_TRUE(p.add(pooled(2, 10, Pooling::mean)).is_ok());
  std::vector<SeqWorkItem> items;
  std::vector<SeqEvent> events;
  for (int i = 0; i < 16 && p.has_work(); ++i) {
    auto ev = run_step(p, pages, &items);
    events.insert(events.end(), ev.begin(), ev.end());
  }
  EXPECT_FALSE(p.has_work());
  int n_pooled_tokens = 0, next_pos = 0;
  bool shared = false;
  for (const SeqWorkItem& w : items) {
    if (w.seq_id != 2) continue;
    EXPECT_FALSE(w.sample);
    EXPECT_EQ(w.pooling, Pooling::mean);
    EXPECT_EQ(w.start_pos, next_pos) << "chunks in order";
    next_pos += static_cast<int>(w.tokens.size());
    n_pooled_tokens += static_cast<int>(w.tokens.size());
  }
  EXPECT_EQ(n_pooled_tokens, 10) << "the prompt, chunked beside the decodes";
  for (size_t i = 0; i + 1 < items.size(); ++i) shared = shared || (items[i].seq_id == 1 && items[i + 1].seq_id == 2);
  EXPECT_TRUE(shared) << "a decode and a pooling chunk shared a step";
  std::vector<SeqEvent> mine;
  for (const SeqEvent& e : events)
    if (e.seq_id == 2) mine.push_back(e);
  ASSERT_EQ(mine.size(), 1u) << "one event: the final one";
  EXPECT_EQ(mine[0].finish, Finish::stop);
  EXPECT_EQ(mine[0].embedding, (std::vector<float>{2.0f, 10.0f}));
  EXPECT_EQ(mine[0].completion_tokens, 0);
  EXPECT_EQ(mine[0].prompt_tokens, 10);
  EXPECT_EQ(p.n_pages_held(), 0);
  EXPECT_EQ(pages.pool.n_free(), 64) << "every page went back";
}

TEST(SchedulerPooling, OnlyLastPoolingTakesPrefixCacheHits) {
  for (Pooling mode : {Pooling::last, Pooling::mean, Pooling::cls}) {
    SchedulerPolicy p(limits(/*cache=*/true), 64);
    PoolSource pages(64);
    ASSERT_TRUE(p.add(pooled(1, 10, mode)).is_ok());
    while (p.has_work()) run_step(p, pages);
    ASSERT_EQ(p.cached_prefix(pooled(2, 10, mode).prompt), 8) << "two whole pages cached";
    ASSERT_TRUE(p.add(pooled(2, 10, mode)).is_ok());
    std::vector<SeqWorkItem> items;
    std::vector<SeqEvent> events;
    while (p.has_work()) {
      auto ev = run_step(p, pages, &items);
      events.insert(events.end(), ev.begin(), ev.end());
    }
    ASSERT_FALSE(items.empty());
    EXPECT_EQ(items.front().start_pos, mode == Pooling::last ? 8 : 0) << pooling_name(mode);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].embedding, (std::vector<float>{2.0f, 10.0f})) << pooling_name(mode);
  }
}

TEST(SchedulerPooling, APromptMayFillTheContextButNotMore) {
  SchedulerPolicy p(limits(), 64);
  ASSERT_TRUE(p.add(pooled(1, 16, Pooling::last)).is_ok());
  const Status st = p.add(pooled(2, 17, Pooling::last));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("17 tokens"), std::string::npos) << st.message();
  SeqRequest sampling = pooled(3, 4, Pooling::last);
  sampling.max_tokens = 2;
  EXPECT_FALSE(p.add(sampling).is_ok()) << "a pooling request generates nothing";
}

TEST(SchedulerPooling, AMissingEmbeddingIsAnError) {
  SchedulerPolicy p(limits(), 64);
  PoolSource pages(64);
  ASSERT_TRUE(p.add(pooled(1, 3, Pooling::last)).is_ok());
  auto ev = run_step(p, pages, nullptr, /*forget_embeddings=*/true);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::error);
  EXPECT_NE(ev[0].error.find("no embedding"), std::string::npos) << ev[0].error;
  EXPECT_EQ(pages.pool.n_free(), 64);
}

}  // namespace
}  // namespace brigade
