// SchedulerPolicy with the prefix cache, the lease, prefill without chunking and lower-tier loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>

#include "actors/scheduler/policy.h"
#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;
using testing::prompt_req;
using testing::range;

SchedulerLimits cache_limits() {
  SchedulerLimits l;
  l.max_running = 8;
  l.max_waiting = 16;
  l.max_step_tokens = 64;
  l.max_context = 128;
  l.page_size = 4;
  l.vocab_size = 1000;
  l.prefix_cache = true;
  return l;
}


std::vector<SampledResult> one(uint64_t seq) { return {SampledResult{seq, 7, 0.0f, {}}}; }


// Runs every planned step to completion, sampling 500 + position; records the first work item of
// each sequence.
std::map<uint64_t, SeqWorkItem> drain(SchedulerPolicy& p, PageSource& pages) {
  std::map<uint64_t, SeqWorkItem> first;
  for (int steps = 0; p.has_work() && steps < 500; ++steps) {
    auto s = p.plan(pages);
    if (!s) break;
    std::vector<SampledResult> r;
    for (const auto& w : s->seqs) {
      first.emplace(w.seq_id, w);
      if (w.sample) r.push_back({w.seq_id, static_cast<int32_t>(500 + w.start_pos), 0.0f, {}});
    }
    p.complete(s->step_id, r, pages);
  }
  return first;
}

TEST(SchedulerPolicyCache, ASharedPrefixIsComputedOnce) {
  SchedulerPolicy p(cache_limits(), 64, root_key("m"));
  PoolSource pages(64);
  auto prefix = range(10, 9);  // two whole pages and one token
  auto a = prefix, b = prefix;
  a.insert(a.end(), {100, 101, 102});
  b.insert(b.end(), {200, 201});
  ASSERT_TRUE(p.add(prompt_req(1, a, 3)).is_ok());
  auto first_a = drain(p, pages);
  EXPECT_EQ(first_a.at(1).start_pos, 0);
  ASSERT_TRUE(p.add(prompt_req(2, b, 3)).is_ok());
  auto first_b = drain(p, pages);
  // b starts after the two cached pages, reading a's pages for them.
  const SeqWorkItem& w = first_b.at(2);
  EXPECT_EQ(w.start_pos, 8);
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{18, 200, 201}));
  EXPECT_EQ(std::vector<int32_t>(w.block_table.begin(), w.block_table.begin() + 2),
            std::vector<int32_t>(first_a.at(1).block_table.begin(), first_a.at(1).block_table.begin() + 2));
  EXPECT_TRUE(w.history.empty()) << "no penalties, no history";
  const PrefixCacheStats st = p.cache_stats();
  EXPECT_EQ(st.lookups, 2u);
  EXPECT_EQ(st.hit_tokens, 8u);
  // Everything ended: the pool's used pages are exactly the cache's.
  EXPECT_EQ(pages.pool.n_used(), st.cached_pages);
  EXPECT_EQ(p.n_pages_held(), st.cached_pages);
  EXPECT_GT(st.cached_pages, 0);
}

// In-batch prefix sharing: b arrives with a (same step) and shares a's first 16 tokens, none
// cached yet. b waits while a prefills them (an unrelated c is admitted meanwhile), then starts
// after them, reading a's pages; with the sharing off, b computes them too.
// Runs every planned step to completion as drain() does; each sequence's (step index, first
// work item), and its last work item.
struct Items {
  std::map<uint64_t, std::pair<int, SeqWorkItem>> first;
  std::map<uint64_t, SeqWorkItem> last;
};
Items run_all(SchedulerPolicy& p, PageSource& pages, int step = 0) {
  Items out;
  for (; p.has_work() && step < 500; ++step) {
    auto s = p.plan(pages);
    if (!s) break;
    std::vector<SampledResult> r;
    for (const auto& w : s->seqs) {
      out.first.emplace(w.seq_id, std::pair{step, w});
      out.last[w.seq_id] = w;
      if (w.sample) r.push_back({w.seq_id, static_cast<int32_t>(500 + w.start_pos), 0.0f, {}});
    }
    p.complete(s->step_id, r, pages);
  }
  return out;
}

TEST(SchedulerPolicyCache, APromptWaitsForTheSharedPrefixBeingPrefilledAndTakesItFromTheCache) {
  for (const int share : {4, 0}) {
    SchedulerLimits l = cache_limits();
    l.max_step_tokens = 8;  // a's 20 tokens take three steps
    l.in_batch_prefix_tokens = share;
    SchedulerPolicy p(l, 64, root_key("m"));
    PoolSource pages(64);
    auto b = range(10, 16);
    b.insert(b.end(), {900, 901});
    ASSERT_TRUE(p.add(prompt_req(1, range(10, 20), 2)).is_ok());
    ASSERT_TRUE(p.add(prompt_req(2, b, 2)).is_ok());
    ASSERT_TRUE(p.add(prompt_req(3, range(300, 3), 2)).is_ok());
    auto s0 = p.plan(pages);  // a's first chunk
    ASSERT_TRUE(s0.has_value());
    EXPECT_EQ(p.n_running(), share > 0 ? 2 : 3) << "with the sharing, c is admitted while b waits";
    EXPECT_EQ(p.n_waiting(), share > 0 ? 1 : 0);
    p.complete(s0->step_id, {}, pages);
    const Items items = run_all(p, pages, 1);
    const auto& [b_step, wb] = items.first.at(2);
    if (share > 0) {
      EXPECT_EQ(wb.start_pos, 16) << "b starts after the four pages a computed for both";
      EXPECT_EQ(wb.tokens, (std::vector<int32_t>{900, 901}));
      EXPECT_EQ(std::vector<int32_t>(wb.block_table.begin(), wb.block_table.begin() + 4),
                std::vector<int32_t>(items.last.at(1).block_table.begin(), items.last.at(1).block_table.begin() + 4));
      EXPECT_EQ(b_step, 2) << "admitted once a's second chunk had returned: its pages [8, 16) were in";
      EXPECT_EQ(p.cache_stats().in_batch_waits, 1u);
      EXPECT_EQ(p.cache_stats().hit_tokens, 16u);
    } else {
      EXPECT_EQ(wb.start_pos, 0) << "off: b computes the shared tokens beside a";
      EXPECT_EQ(p.cache_stats().in_batch_waits, 0u);
    }
    EXPECT_EQ(pages.pool.n_used(), p.cache_stats().cached_pages) << "no page leaked";
  }
}

// While the head waits for a running prefill, the pages asked of the KV manager are those of the
// request admission tries next (c: 1 page), not the waiting head's (b: 5).
TEST(SchedulerPolicyCache, PagesShortCountsTheRequestAdmissionTriesNext) {
  SchedulerLimits l = cache_limits();
  l.max_step_tokens = 8;
  l.in_batch_prefix_tokens = 4;
  SchedulerPolicy p(l, 64, root_key("m"));
  PoolSource pages(6);  // a's 20 tokens and one more: every page
  auto b = range(10, 16);
  b.insert(b.end(), {900, 901});
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 20), 2)).is_ok());
  ASSERT_TRUE(p.add(prompt_req(2, b, 2)).is_ok());
  ASSERT_TRUE(p.add(prompt_req(3, range(300, 3), 2)).is_ok());
  auto s0 = p.plan(pages);
  ASSERT_TRUE(s0.has_value());
  EXPECT_EQ(p.n_running(), 1);
  EXPECT_EQ(p.n_waiting(), 2);
  EXPECT_EQ(pages.n_available(), 0);
  EXPECT_EQ(p.pages_short(pages), 1) << "c's one page; b waits for a's pages and needs none yet";
}

// The wait ends with the leader: b, waiting for a's prefill, is admitted as soon as a is aborted
// and computes the prefix itself; an identical prompt waits for the whole of it but its last
// page, then computes only that.
TEST(SchedulerPolicyCache, AWaitEndsWithTheLeaderAndNeverCoversTheLastPage) {
  SchedulerLimits l = cache_limits();
  l.max_step_tokens = 8;
  l.in_batch_prefix_tokens = 4;
  {
    SchedulerPolicy p(l, 64, root_key("m"));
    PoolSource pages(64);
    ASSERT_TRUE(p.add(prompt_req(1, range(10, 20), 2)).is_ok());
    ASSERT_TRUE(p.add(prompt_req(2, range(10, 20), 2)).is_ok());
    auto s = p.plan(pages);  // a's first chunk; b waits
    ASSERT_TRUE(s.has_value());
    ASSERT_EQ(s->seqs.size(), 1u);
    EXPECT_EQ(s->seqs[0].seq_id, 1u);
    p.abort(1, pages);
    p.complete(s->step_id, {}, pages);
    const Items items = run_all(p, pages);
    EXPECT_EQ(items.first.at(2).second.start_pos, 8) << "a's first two pages made it in before the abort";
  }
  SchedulerPolicy p(l, 64, root_key("m"));
  PoolSource pages(64);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 20), 2)).is_ok());
  ASSERT_TRUE(p.add(prompt_req(2, range(10, 20), 2)).is_ok());
  const Items items = run_all(p, pages);
  EXPECT_EQ(items.first.at(2).second.start_pos, 16) << "the last page is computed for the logits (limit 19)";
  EXPECT_EQ(items.first.at(2).second.tokens, range(26, 4));
}

TEST(SchedulerPolicyCache, AWholeCachedPromptStillComputesItsLastToken) {
  SchedulerPolicy p(cache_limits(), 64, root_key("m"));
  PoolSource pages(64);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 8), 2)).is_ok());
  drain(p, pages);
  ASSERT_TRUE(p.add(prompt_req(2, range(10, 8), 2)).is_ok());
  auto first = drain(p, pages);
  EXPECT_EQ(first.at(2).start_pos, 4) << "8 tokens cached, but the last page is recomputed for the logits";
  EXPECT_EQ(first.at(2).tokens.size(), 4u);
}

TEST(SchedulerPolicyCache, PenaltiesGetTheCachedPrefixAsHistory) {
  SchedulerPolicy p(cache_limits(), 64, root_key("m"));
  PoolSource pages(64);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 12), 2)).is_ok());
  drain(p, pages);
  SeqRequest r = prompt_req(2, range(10, 14), 2);
  r.sampling.repetition_penalty = 1.3f;
  ASSERT_TRUE(p.add(std::move(r)).is_ok());
  auto first = drain(p, pages);
  EXPECT_EQ(first.at(2).start_pos, 12);
  EXPECT_EQ(first.at(2).history, range(10, 12));
}

TEST(SchedulerPolicyCache, CachedPagesAreEvictedBeforeAnyPreemption) {
  SchedulerPolicy p(cache_limits(), 8, root_key("m"));
  PoolSource pages(8);  // 32 token slots
  for (uint64_t id = 1; id <= 6; ++id) {
    ASSERT_TRUE(p.add(prompt_req(id, range(static_cast<int>(id) * 100, 13), 3)).is_ok());
    drain(p, pages);  // each leaves 3 or 4 pages cached, evicting older ones to fit
  }
  EXPECT_EQ(p.n_preemptions(), 0u);
  EXPECT_GT(p.cache_stats().evicted_pages, 0u);
  EXPECT_EQ(pages.pool.n_used(), p.cache_stats().cached_pages);
  // The most recent prompt is still cached.
  ASSERT_TRUE(p.add(prompt_req(7, range(600, 13), 1)).is_ok());
  EXPECT_EQ(drain(p, pages).at(7).start_pos, 12);
}

// A cache reset (Engine::reset_prefix_cache): the cached pages no sequence uses go back to the
// pool; a running sequence's path stays (kept) and it runs on to the end, caching again.
TEST(SchedulerPolicyCache, AResetFreesWhatNoSequenceUsesAndKeepsTheRest) {
  SchedulerPolicy p(cache_limits(), 64, root_key("m"));
  PoolSource pages(64);
  ASSERT_TRUE(p.add(prompt_req(1, range(100, 13), 3)).is_ok());
  drain(p, pages);  // 15 tokens computed: 3 whole pages cached
  ASSERT_EQ(p.cache_stats().cached_pages, 3);
  auto b = range(100, 8);  // shares 2 pages with request 1, then its own
  b.insert(b.end(), {300, 301, 302, 303, 304});
  ASSERT_TRUE(p.add(prompt_req(2, b, 10)).is_ok());
  auto step = p.plan(pages);
  ASSERT_TRUE(step.has_value());
  ASSERT_EQ(step->seqs.size(), 1u);
  EXPECT_EQ(step->seqs[0].start_pos, 8);
  p.complete(step->step_id, one(2), pages);  // its third page (300..303) is cached and locked now
  ASSERT_EQ(p.cache_stats().cached_pages, 4);
  const int used = pages.pool.n_used();
  const auto [freed, kept] = p.reset_cache(pages);
  EXPECT_EQ(freed, 1) << "request 1's own third page";
  EXPECT_EQ(kept, 3) << "request 2's path: the two shared pages and its own";
  EXPECT_EQ(pages.pool.n_used(), used - 1);
  EXPECT_EQ(p.cache_stats().evicted_pages, 0u) << "not counted as evictions";
  EXPECT_EQ(p.cached_prefix(range(100, 13)), 8) << "only the shared pages are left of request 1's prompt";
  drain(p, pages);
  EXPECT_FALSE(p.has_work());
  EXPECT_GE(p.cache_stats().cached_pages, 3);
  EXPECT_EQ(pages.pool.n_used(), p.cache_stats().cached_pages) << "no page leaked";
  const auto [freed_after, kept_after] = p.reset_cache(pages);
  EXPECT_GE(freed_after, 3);
  EXPECT_EQ(kept_after, 0);
  EXPECT_EQ(pages.pool.n_used(), 0);
}

TEST(SchedulerPolicyCache, WaitsForTheLeaseInsteadOfPreempting) {
  SchedulerLimits l = cache_limits();
  l.prefix_cache = false;
  SchedulerPolicy p(l, 100);
  PoolSource pages(2, /*obtainable=*/50);  // the lease holds 2 pages; the manager has 50 more
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 6), 20)).is_ok());
  auto s = p.plan(pages);
  ASSERT_TRUE(s);
  p.complete(s->step_id, one(1), pages);
  ASSERT_TRUE(p.add(prompt_req(2, range(30, 3), 20)).is_ok());
  // Seq 1 needs a third page at position 8; seq 2 waits for pages too: nobody is preempted.
  for (int i = 0; i < 3; ++i) {
    auto t = p.plan(pages);
    if (t) p.complete(t->step_id, one(1), pages);
  }
  EXPECT_EQ(p.n_preemptions(), 0u);
  EXPECT_GT(p.pages_short(pages), 0) << "what to lease from the page manager";
}

TEST(SchedulerPolicyCache, WithoutChunkedPrefillPromptsRunWholeAndAlone) {
  SchedulerLimits l = cache_limits();
  l.prefix_cache = false;
  l.chunked_prefill = false;
  l.max_step_tokens = 16;
  SchedulerPolicy p(l, 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 5), 4)).is_ok());
  auto s1 = p.plan(pages);
  ASSERT_TRUE(s1);
  p.complete(s1->step_id, one(1), pages);
  ASSERT_TRUE(p.add(prompt_req(2, range(30, 40), 4)).is_ok());  // longer than the step budget
  auto s2 = p.plan(pages);
  ASSERT_TRUE(s2);
  ASSERT_EQ(s2->seqs.size(), 1u) << "a prefill step carries no decodes";
  EXPECT_EQ(s2->seqs[0].seq_id, 2u);
  EXPECT_EQ(s2->seqs[0].tokens.size(), 40u) << "whole, beyond the budget, when alone";
  p.complete(s2->step_id, one(2), pages);
  auto s3 = p.plan(pages);
  ASSERT_TRUE(s3);
  ASSERT_EQ(s3->seqs.size(), 2u) << "then both decode; first: seq " << s3->seqs[0].seq_id << " at "
                                  << s3->seqs[0].start_pos << " with " << s3->seqs[0].tokens.size() << " tokens";
}

TEST(SchedulerPolicyCache, LowerTierLoadsGateTheSequenceAndSkipWhatArrived) {
  SchedulerLimits l = cache_limits();
  l.lower_tiers = true;
  SchedulerPolicy p(l, 64, root_key("m"));
  PoolSource pages(64);
  auto prompt = range(10, 14);
  ASSERT_TRUE(p.add(prompt_req(1, prompt, 2)).is_ok());
  EXPECT_FALSE(p.plan(pages)) << "waiting for the load, nothing else to run";
  auto loads = p.take_loads();
  ASSERT_EQ(loads.size(), 1u);
  RadixTree probe(4, EvictionPolicy::lru, root_key("m"));
  EXPECT_EQ(loads[0].keys, probe.continue_keys(probe.match(prompt, 0), prompt, 3));
  EXPECT_EQ(loads[0].pages.size(), 3u);
  EXPECT_TRUE(p.loaded(1, 2, pages).empty());  // two of three pages arrived
  auto s = p.plan(pages);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->seqs[0].start_pos, 8);
  EXPECT_EQ(s->seqs[0].tokens, range(18, 6));
  EXPECT_EQ(p.cache_stats().loaded_tokens, 8u);
  EXPECT_TRUE(p.take_loads().empty());
  // Write-through: the page that entered the cache by computation is saved with its key; the two
  // loaded ones are in the tiers already.
  p.complete(s->step_id, one(1), pages);
  drain(p, pages);
  auto saves = p.take_saves();
  ASSERT_EQ(saves.size(), 1u);
  EXPECT_EQ(saves[0].key, loads[0].keys[2]);
  EXPECT_EQ(saves[0].page, loads[0].pages[2]);
}

TEST(SchedulerPolicyCache, RecomputesWhenLoadingCostsMore) {
  SchedulerLimits l = cache_limits();
  l.lower_tiers = true;
  SchedulerPolicy p(l, 64, root_key("m"));
  PoolSource pages(64);
  p.set_costs(/*load us per page=*/1000.0, /*prefill us per token=*/10.0);  // 1000 > 4 x 10
  int loads = 0;
  for (uint64_t id = 1; id <= 16; ++id) {
    ASSERT_TRUE(p.add(prompt_req(id, range(static_cast<int>(id) * 50, 14), 1)).is_ok());
    drain(p, pages);
    loads += static_cast<int>(p.take_loads().size());
  }
  EXPECT_EQ(loads, 2) << "only the every-8th probe loads";
  p.set_costs(10.0, 10.0);  // 10 < 4 x 10
  ASSERT_TRUE(p.add(prompt_req(99, range(900, 14), 1)).is_ok());
  p.plan(pages);
  EXPECT_EQ(p.take_loads().size(), 1u);
}

TEST(SchedulerPolicyCache, AbortWhileLoadingEndsWhenTheLoadReturns) {
  SchedulerLimits l = cache_limits();
  l.lower_tiers = true;
  SchedulerPolicy p(l, 64, root_key("m"));
  PoolSource pages(64);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 14), 2)).is_ok());
  EXPECT_FALSE(p.plan(pages));
  ASSERT_EQ(p.take_loads().size(), 1u);
  EXPECT_TRUE(p.abort(1, pages).empty()) << "the executor is writing its pages";
  auto ev = p.loaded(1, 3, pages);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::abort);
  EXPECT_FALSE(p.has_work());
  EXPECT_EQ(pages.pool.n_used(), p.cache_stats().cached_pages);
}

// ---- partly filled pages (SchedulerLimits::partial_pages) ----

SchedulerLimits partial_limits() {
  SchedulerLimits l = cache_limits();
  l.partial_pages = true;
  return l;
}

// A finished request leaves its last, partly filled page cached; the next turn of the
// conversation (its prompt and output, then more) copies those rows instead of computing them.
TEST(SchedulerPolicyCache, TheNextTurnCopiesTheRowsOfTheLastPartlyFilledPage) {
  SchedulerPolicy p(partial_limits(), 64, root_key("m"));
  PoolSource pages(64);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 9), 3)).is_ok());
  const auto first_a = drain(p, pages);  // tokens 10..18, 500, 509, 510; KV for the first 11
  EXPECT_EQ(first_a.at(1).copy_rows, 0) << "nothing cached yet";
  EXPECT_EQ(p.cache_stats().cached_pages, 3) << "two whole pages and the partly filled third";
  auto b = range(10, 9);
  b.insert(b.end(), {500, 509, 510, 300});
  ASSERT_TRUE(p.add(prompt_req(2, b, 2)).is_ok());
  const auto first_b = drain(p, pages);
  const SeqWorkItem& w = first_b.at(2);
  EXPECT_EQ(w.start_pos, 11);
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{510, 300}));
  EXPECT_EQ(w.copy_rows, 3);
  EXPECT_EQ(w.copy_src, first_a.at(1).block_table[2]);
  EXPECT_EQ(w.copy_dst, w.block_table[2]);
  EXPECT_NE(w.copy_src, w.copy_dst) << "copy-on-write: the cached page is never written";
  const PrefixCacheStats st = p.cache_stats();
  EXPECT_EQ(st.hit_tokens, 11u);
  EXPECT_EQ(st.partial_hit_tokens, 3u);
  EXPECT_EQ(pages.pool.n_used(), st.cached_pages) << "no page leaked: the tails are the cache's";
  EXPECT_EQ(p.n_pages_held(), st.cached_pages);
  // b's longer tail replaced a's, which it covers: one tail after the two shared pages.
  EXPECT_EQ(st.cached_pages, 4) << "2 shared pages, b's third (whole now: 18 500 509 510) and b's tail";
}

TEST(SchedulerPolicyCache, AWholeCachedPromptComputesOnlyItsLastTokenWithPartialPages) {
  SchedulerPolicy p(partial_limits(), 64, root_key("m"));
  PoolSource pages(64);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 8), 2)).is_ok());
  const auto first_a = drain(p, pages);
  ASSERT_TRUE(p.add(prompt_req(2, range(10, 8), 2)).is_ok());
  const auto first = drain(p, pages);
  const SeqWorkItem& w = first.at(2);
  EXPECT_EQ(w.start_pos, 7) << "3 rows of the cached second page are copied";
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{17}));
  EXPECT_EQ(w.copy_rows, 3);
  EXPECT_EQ(w.copy_src, first_a.at(1).block_table[1]);
  EXPECT_EQ(w.copy_dst, w.block_table[1]);
  // Off, the last page is computed whole (AWholeCachedPromptStillComputesItsLastToken).
}

// The page a copy reads stays in the cache until the step that copies it comes back: no
// admission can evict it meanwhile and write into it.
TEST(SchedulerPolicyCache, TheSourceOfAPendingCopyIsNeverEvicted) {
  SchedulerPolicy p(partial_limits(), 8, root_key("m"));
  PoolSource pages(8);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 6), 1)).is_ok());
  drain(p, pages);  // one whole page cached, and the tail 14 15
  ASSERT_EQ(pages.pool.n_used(), 2);
  auto b = range(10, 6);
  b.push_back(99);
  ASSERT_TRUE(p.add(prompt_req(2, b, 1)).is_ok());
  auto step = p.plan(pages);
  ASSERT_TRUE(step.has_value());
  ASSERT_EQ(step->seqs.size(), 1u);
  const SeqWorkItem w = step->seqs[0];
  ASSERT_EQ(w.copy_rows, 2);
  EXPECT_EQ(p.cache_stats().idle_pages, 0) << "the tail is held, the whole page locked";
  // Five pages are free; c needs six. Evicting the held tail would give it the sixth.
  ASSERT_TRUE(p.add(prompt_req(3, range(200, 20), 1)).is_ok());
  auto blocked = p.plan(pages);
  EXPECT_FALSE(blocked.has_value()) << "c waits: nothing else may run";
  p.complete(step->step_id, one(2), pages);  // the copy is done; b ends, its tail replaces a's
  const auto rest = drain(p, pages);
  ASSERT_TRUE(rest.count(3));
  for (int32_t page : rest.at(3).block_table) EXPECT_NE(page, w.copy_dst) << "b's tail is cached, not free";
  EXPECT_EQ(pages.pool.n_used(), p.cache_stats().cached_pages);
}

// A sequence aborted while its copy is in flight lets the source go when the step returns, and
// one aborted before its first step when it leaves.
TEST(SchedulerPolicyCache, AbortedCopiesLetTheirSourceGo) {
  SchedulerPolicy p(partial_limits(), 64, root_key("m"));
  PoolSource pages(64);
  ASSERT_TRUE(p.add(prompt_req(1, range(10, 6), 1)).is_ok());
  drain(p, pages);
  auto b = range(10, 6);
  b.push_back(99);
  ASSERT_TRUE(p.add(prompt_req(2, b, 4)).is_ok());
  auto step = p.plan(pages);
  ASSERT_TRUE(step.has_value());
  ASSERT_EQ(step->seqs[0].copy_rows, 2);
  EXPECT_TRUE(p.abort(2, pages).empty()) << "in flight: it ends when its step returns";
  p.complete(step->step_id, one(2), pages);
  EXPECT_FALSE(p.has_work());
  EXPECT_EQ(p.cache_stats().idle_pages, p.cache_stats().cached_pages) << "nothing held";
  EXPECT_EQ(pages.pool.n_used(), p.cache_stats().cached_pages);
  const auto [freed, kept] = p.reset_cache(pages);
  EXPECT_EQ(kept, 0);
  EXPECT_EQ(pages.pool.n_used(), 0);
}

}  // namespace
}  // namespace brigade

namespace brigade {
namespace {

// A preempted sequence whose tokens all but the last are cached again (whole pages, a partly
// filled page's rows, or a recurrent model's state snapshot) is admitted with a decode to run,
// not a chunk. Admission comes after a step's decodes, so that decode must still join the step:
// a plan that admits it and plans nothing would leave the scheduler idle with work (nothing in
// flight to wake it). Requests arrive between steps in random order, two steps in flight, a pool
// small enough to preempt: whenever nothing is in flight, a plan must come.
TEST(SchedulerPolicyCache, APreemptedSequenceWhosePrefixIsAllCachedStillRuns) {
  uint64_t preemptions = 0;
  for (const bool recurrent : {false, true}) {
    for (unsigned seed = 0; seed < 300; ++seed) {
      SchedulerLimits l = cache_limits();
      l.max_running = 16;
      l.max_step_tokens = 8;
      l.max_context = 2048;
      l.page_size = 8;
      l.partial_pages = !recurrent;
      l.state_snapshots = recurrent ? 8 : 0;
      SchedulerPolicy p(l, 10, root_key("m"));
      PoolSource pages(10);
      std::mt19937 rng(seed);
      int added = 0;
      std::deque<std::pair<uint64_t, std::vector<SampledResult>>> inflight;
      auto plan = [&] {
        auto s = p.plan(pages);
        if (!s) return false;
        std::vector<SampledResult> r;
        for (const auto& w : s->seqs)
          if (w.sample) r.push_back({w.seq_id, 20, 0.0f, {}});
        inflight.emplace_back(s->step_id, std::move(r));
        return true;
      };
      for (int steps = 0; steps < 20000 && (added < 8 || p.has_work()); ++steps) {
        if (added < 8 && rng() % 3 == 0) {
          ASSERT_TRUE(p.add(prompt_req(added + 1, added % 2 ? range(12, 1) : range(5, 7), 40)).is_ok());
          ++added;
          continue;
        }
        if (inflight.size() < 2 && rng() % 2 && plan()) continue;
        if (!inflight.empty()) {
          p.complete(inflight.front().first, inflight.front().second, pages);
          inflight.pop_front();
        } else if (added == 8 && !plan()) {
          FAIL() << (recurrent ? "recurrent" : "attention") << ", seed " << seed << ": " << p.n_running()
                 << " running and nothing planned";
        }
      }
      EXPECT_FALSE(p.has_work()) << "seed " << seed;
      preemptions += p.n_preemptions();
    }
  }
  EXPECT_GT(preemptions, 300u);
}

}  // namespace
}  // namespace brigade
