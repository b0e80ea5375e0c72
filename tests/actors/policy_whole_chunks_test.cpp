// SchedulerPolicy under a steady load of decodes: a chunk that must run whole (a fixed-size
// image, which attends to all of itself; a prompt_whole prompt) waits at most one step for room.
// Planned after the decodes, it would wait as long as they keep the step's budget below its
// length; having found no room once, it goes before them, and the decodes it displaces wait that
// one step. Also: prompt_whole pages never enter the prefix cache.
#include <gtest/gtest.h>

#include <climits>
#include <map>
#include <memory>
#include <vector>

#include "actors/scheduler/policy.h"
#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;
using testing::prompt_req;
using testing::range;
using testing::sample_by_position;

constexpr int32_t kImageToken = 900;
// The new request's id: below the decoders', so that a decode of it would be planned first.
constexpr uint64_t kNew = 0;

// Steps of 8 tokens, up to 8 sequences, pages of 4; the vocabulary holds the image token.
SchedulerLimits busy_limits() {
  SchedulerLimits l;
  l.max_running = 8;
  l.max_waiting = 8;
  l.max_step_tokens = 8;
  l.max_context = 256;
  l.page_size = 4;
  l.vocab_size = 1000;
  return l;
}

// Five sequences decoding for 200 tokens each: after their prompts, every step holds five decodes,
// leaving 3 of the 8 tokens.
void start_decoders(SchedulerPolicy& p, PoolSource& pages) {
  for (uint64_t id = 1; id <= 5; ++id) ASSERT_TRUE(p.add(prompt_req(id, {static_cast<int32_t>(10 + id)}, 200)).is_ok());
  for (int steps = 0; steps < 4; ++steps) {
    auto s = p.plan(pages);
    ASSERT_TRUE(s);
    p.complete(s->step_id, sample_by_position(*s), pages);
  }
}

struct Seen {
  int whole_step = -1;       // the step (counted from the new request's submission) that ran it
  size_t whole_tokens = 0;   // its size
  size_t beside = 0;         // the decodes in that step
  std::map<uint64_t, int> longest_gap;  // per decoder: the most steps in a row it did not decode
};

// Plans 12 steps after the new request (kNew) arrives and records when its chunk `at` (the
// prompt position it starts at) runs. No step holds a sequence twice (its whole chunk samples
// the token a decode beside it would need).
Seen run_busy(SchedulerPolicy& p, PoolSource& pages, int at) {
  Seen seen;
  std::map<uint64_t, int> gap;
  for (int step = 0; step < 12; ++step) {
    auto s = p.plan(pages);
    if (!s) break;
    std::map<uint64_t, bool> decoded;
    std::map<uint64_t, int> items;
    for (const auto& w : s->seqs) EXPECT_EQ(++items[w.seq_id], 1) << "sequence " << w.seq_id << " twice in a step";
    for (const auto& w : s->seqs)
      if (w.seq_id == kNew && w.start_pos == at) {
        seen.whole_step = step;
        seen.whole_tokens = w.tokens.size();
        seen.beside = s->seqs.size() - 1;
      } else if (w.seq_id != kNew) {
        decoded[w.seq_id] = true;
      }
    for (uint64_t id = 1; id <= 5; ++id) {
      gap[id] = decoded[id] ? 0 : gap[id] + 1;
      seen.longest_gap[id] = std::max(seen.longest_gap[id], gap[id]);
    }
    p.complete(s->step_id, sample_by_position(*s), pages);
  }
  return seen;
}

TEST(SchedulerPolicyWholeChunks, APromptWholeWaitsOneStepThenGoesBeforeTheDecodes) {
  SchedulerLimits l = busy_limits();
  l.prompt_whole = true;
  SchedulerPolicy p(l, 200);
  PoolSource pages(200);
  start_decoders(p, pages);
  ASSERT_TRUE(p.add(prompt_req(kNew, range(100, 7), 4)).is_ok());
  const Seen seen = run_busy(p, pages, 0);
  EXPECT_EQ(seen.whole_step, 1) << "no room beside five decodes (3 of 8 tokens); first in the next step";
  EXPECT_EQ(seen.whole_tokens, 7u) << "the prompt whole";
  EXPECT_EQ(seen.beside, 1u) << "one decode in the token left";
  for (const auto& [id, g] : seen.longest_gap) EXPECT_LE(g, 1) << "decoder " << id << " waits one step at most";
}

// Gemma 3's images: tokens_per_image image tokens that run in one step. The text before the
// image is chunked as usual; the image waits one step at most.
TEST(SchedulerPolicyWholeChunks, AFixedSizeImageWaitsOneStepThenGoesBeforeTheDecodes) {
  SchedulerLimits l = busy_limits();
  l.image_token = kImageToken;
  l.tokens_per_image = 6;
  l.image_size = 2;
  SchedulerPolicy p(l, 200);
  PoolSource pages(200);
  start_decoders(p, pages);
  SeqRequest r = prompt_req(kNew, {100, 101}, 4);
  for (int i = 0; i < 6; ++i) r.prompt.push_back(kImageToken);
  r.prompt.push_back(102);
  SeqImage im;
  im.pixels = std::make_shared<const std::vector<float>>(std::vector<float>(3 * 2 * 2, 0.5f));
  r.images.push_back(im);
  ASSERT_TRUE(p.add(std::move(r)).is_ok());
  // Step 0: five decodes and the text [0, 2) in the 3 tokens left; step 1: the image (6 tokens)
  // finds 3 left; step 2: it goes first.
  const Seen seen = run_busy(p, pages, 2);
  EXPECT_EQ(seen.whole_step, 2);
  EXPECT_GE(seen.whole_tokens, 6u) << "the image whole (and the text after it, budget allowing)";
  EXPECT_EQ(seen.beside + seen.whole_tokens, 8u) << "the decodes fill what it leaves";
  for (const auto& [id, g] : seen.longest_gap) EXPECT_LE(g, 1) << "decoder " << id << " waits one step at most";
}

// A whole prompt's pages hold KV that saw the whole prompt: they stay out of the prefix cache (a
// causal model's go in).
TEST(SchedulerPolicyWholeChunks, APromptWholesPagesStayOutOfThePrefixCache) {
  for (const bool whole : {true, false}) {
    SchedulerLimits l = busy_limits();
    l.prompt_whole = whole;
    l.prefix_cache = true;
    SchedulerPolicy p(l, 64, root_key("m"));
    PoolSource pages(64);
    ASSERT_TRUE(p.add(prompt_req(1, range(10, 8), 3)).is_ok());
    for (int steps = 0; p.has_work() && steps < 20; ++steps) {
      auto s = p.plan(pages);
      ASSERT_TRUE(s);
      p.complete(s->step_id, sample_by_position(*s), pages);
    }
    EXPECT_EQ(p.cache_stats().cached_pages, whole ? 0 : 2) << (whole ? "prompt_whole" : "causal");
    EXPECT_EQ(pages.pool.n_free(), whole ? 64 : 62) << "every page not cached is back";
  }
}

}  // namespace
}  // namespace brigade
