// RouterPolicy and its PrefixTree without actors: cache affinity, load, round robin, thresholds,
// instance failure, and the tree's matching and LRU trimming.
#include "actors/router/router_policy.h"

#include <gtest/gtest.h>

#include <numeric>

namespace brigade {
namespace {

std::vector<int32_t> seq(int32_t first, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

RouterConfig cache_aware(double threshold = 0.3, int abs = 64, double rel = 1.5) {
  RouterConfig c;
  c.cache_threshold = threshold;
  c.balance_abs_threshold = abs;
  c.balance_rel_threshold = rel;
  return c;
}

TEST(PrefixTree, MatchesTheLongestRecordedPrefix) {
  PrefixTree t(1000);
  EXPECT_EQ(t.match(seq(0, 10)), 0);
  t.insert(seq(0, 10));
  EXPECT_EQ(t.n_tokens(), 10);
  EXPECT_EQ(t.match(seq(0, 10)), 10);
  EXPECT_EQ(t.match(seq(0, 4)), 4) << "a prefix of a recorded prompt";
  EXPECT_EQ(t.match(seq(0, 20)), 10) << "extends a recorded prompt";
  EXPECT_EQ(t.match(concat(seq(0, 6), seq(100, 5))), 6) << "diverges inside an edge";
  t.insert(concat(seq(0, 6), seq(100, 5)));  // splits the edge at 6
  EXPECT_EQ(t.n_tokens(), 15);
  EXPECT_EQ(t.match(seq(0, 10)), 10);
  EXPECT_EQ(t.match(concat(seq(0, 6), seq(100, 5))), 11);
  t.insert(seq(0, 10));  // already there: nothing new
  EXPECT_EQ(t.n_tokens(), 15);
  EXPECT_EQ(t.match(seq(50, 3)), 0);
  EXPECT_EQ(t.match({}), 0);
}

TEST(PrefixTree, TrimsLeastRecentlyUsedBranchesToItsBound) {
  PrefixTree t(100);
  t.insert(seq(0, 40));     // oldest
  t.insert(seq(1000, 40));
  t.insert(seq(0, 40));     // refreshed: now newer than 1000..
  t.insert(seq(2000, 40));  // 120 > 100: trims to <= 87, oldest leaf first
  EXPECT_LE(t.n_tokens(), 100);
  EXPECT_EQ(t.match(seq(1000, 40)), 0) << "the least recently used branch went";
  EXPECT_EQ(t.match(seq(0, 40)), 40);
  EXPECT_EQ(t.match(seq(2000, 40)), 40);
  for (int i = 0; i < 50; ++i) {
    t.insert(seq(10000 * (i + 3), 30));
    EXPECT_LE(t.n_tokens(), 100) << "bounded after every insert";
  }
  EXPECT_EQ(t.match(seq(10000 * 52, 30)), 30) << "the newest survives";
  PrefixTree small(8);
  small.insert(seq(0, 20));  // longer than the bound: its first 8 tokens are kept
  EXPECT_EQ(small.n_tokens(), 8);
  EXPECT_EQ(small.match(seq(0, 20)), 8);
}

TEST(RouterPolicy, CacheHitsGoToTheSameInstance) {
  RouterPolicy p(cache_aware(), 2);
  const auto system = seq(0, 64);
  auto a = p.route(1, concat(system, seq(500, 16)));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->reason, RouteReason::load) << "nothing cached anywhere yet";
  for (uint64_t id = 2; id < 6; ++id) {
    auto d = p.route(id, concat(system, seq(600 + 20 * static_cast<int32_t>(id), 16)));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->instance, a->instance) << "request " << id << " shares 64 of 80 tokens";
    EXPECT_EQ(d->reason, RouteReason::cache);
    EXPECT_EQ(d->matched_tokens, 64);
  }
  EXPECT_EQ(p.load(a->instance).n_requests, 5);
  EXPECT_EQ(p.load(1 - a->instance).n_requests, 0);
}

// Each instance caches a LoRA adapter's pages apart from the base model's and the other
// adapters': a prompt is matched only against prompts of its own adapter.
TEST(RouterPolicy, AdaptersMatchOnlyTheirOwnPrompts) {
  RouterPolicy p(cache_aware(), 2);
  const auto prompt = seq(0, 64);
  auto base = p.route(1, prompt);
  ASSERT_TRUE(base.has_value());
  auto choice = p.choose(prompt, /*lora=*/1);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->reason, RouteReason::load) << "adapter 1 has cached nothing anywhere";
  EXPECT_EQ(choice->matched_tokens, 0);
  auto first = p.route(2, prompt, 1);
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(first->instance, base->instance) << "the least loaded, not the base prompt's instance";
  auto again = p.route(3, concat(prompt, seq(900, 8)), 1);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->reason, RouteReason::cache);
  EXPECT_EQ(again->instance, first->instance);
  EXPECT_EQ(again->matched_tokens, 64) << "prompt tokens only";
  auto other = p.choose(prompt, 2);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->matched_tokens, 0) << "adapter 2 shares nothing with adapter 1";
  auto base_again = p.choose(prompt);
  ASSERT_TRUE(base_again.has_value());
  EXPECT_EQ(base_again->instance, base->instance);
  EXPECT_EQ(base_again->matched_tokens, 64);
}

// vLLM's cache_salt: the instances cache a salted prompt apart from other salts' and unsalted
// ones, so the trees match it only against prompts of the same salt (and adapter).
TEST(RouterPolicy, SaltedPromptsMatchOnlyTheirOwnSalts) {
  RouterPolicy p(cache_aware(), 2);
  const auto prompt = seq(0, 64);
  auto plain = p.route(1, prompt);
  ASSERT_TRUE(plain.has_value());
  auto salted = p.choose(prompt, 0, "tenant-a");
  ASSERT_TRUE(salted.has_value());
  EXPECT_EQ(salted->reason, RouteReason::load) << "salt a has cached nothing anywhere";
  EXPECT_EQ(salted->matched_tokens, 0);
  auto first = p.route(2, prompt, 0, "tenant-a");
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(first->instance, plain->instance) << "the least loaded, not the unsalted prompt's instance";
  auto again = p.route(3, concat(prompt, seq(900, 8)), 0, "tenant-a");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->reason, RouteReason::cache);
  EXPECT_EQ(again->instance, first->instance);
  EXPECT_EQ(again->matched_tokens, 64) << "prompt tokens only";
  EXPECT_EQ(p.choose(prompt, 0, "tenant-b")->matched_tokens, 0) << "salt b shares nothing with salt a";
  EXPECT_EQ(p.choose(prompt, 1, "tenant-a")->matched_tokens, 0) << "nor does salt a under an adapter";
  auto both = p.route(4, prompt, 1, "tenant-a");
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(p.choose(prompt, 1, "tenant-a")->matched_tokens, 64) << "both markers are no prompt tokens";
  EXPECT_EQ(p.choose(prompt)->instance, plain->instance);
}

TEST(RouterPolicy, DistinctPromptsSpread) {
  RouterPolicy p(cache_aware(), 2);
  int n[2] = {0, 0};
  for (uint64_t id = 1; id <= 10; ++id) {
    auto d = p.route(id, seq(static_cast<int32_t>(id) * 1000, 32));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->reason, RouteReason::load);
    n[d->instance]++;
  }
  EXPECT_EQ(n[0], 5);
  EXPECT_EQ(n[1], 5);
  // Finished requests leave the load; an idle engine still spreads by tree size.
  for (uint64_t id = 1; id <= 10; ++id) p.finished(id);
  EXPECT_EQ(p.load(0).n_requests + p.load(1).n_requests, 0);
  auto x = p.route(11, seq(50000, 32));
  auto y = p.route(12, seq(60000, 48));
  ASSERT_TRUE(x.has_value() && y.has_value());
  EXPECT_NE(x->instance, y->instance);
}

TEST(RouterPolicy, ImbalanceOverridesTheCache) {
  // abs 2, rel 1.5: imbalanced once the busiest has more than 2 requests more than the idlest
  // and more than 1.5x its count.
  RouterPolicy p(cache_aware(0.3, 2, 1.5), 2);
  const auto system = seq(0, 64);
  auto first = p.route(1, concat(system, seq(500, 8)));
  ASSERT_TRUE(first.has_value());
  const int hot = first->instance;
  for (uint64_t id = 2; id <= 3; ++id) {
    auto d = p.route(id, concat(system, seq(500 + 10 * static_cast<int32_t>(id), 8)));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->instance, hot);
    EXPECT_EQ(d->reason, RouteReason::cache) << "3 - 0 is not > 2 before request 3";
  }
  auto d = p.route(4, concat(system, seq(900, 8)));  // 3 vs 0: imbalanced
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->instance, 1 - hot);
  EXPECT_EQ(d->reason, RouteReason::load);
  // The idle instance now holds one: 3 - 1 = 2 is not > 2, so the cache wins again.
  auto e = p.route(5, concat(system, seq(950, 8)));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->reason, RouteReason::cache);
}

TEST(RouterPolicy, RelativeThresholdAlsoHasToBeExceeded) {
  RouterPolicy p(cache_aware(0.3, 0, 3.0), 2);  // any difference counts, but only above 3x
  const auto system = seq(0, 64);
  ASSERT_TRUE(p.route(1, seq(7000, 32)).has_value());  // instance A: a distinct prompt
  auto hot = p.route(2, concat(system, seq(500, 8)));  // the other: least loaded
  ASSERT_TRUE(hot.has_value());
  for (uint64_t id = 3; id <= 5; ++id) {  // 1, 2, then 3 vs 1 before each: not above 3x
    auto d = p.route(id, concat(system, seq(500 + 10 * static_cast<int32_t>(id), 8)));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->instance, hot->instance);
    EXPECT_EQ(d->reason, RouteReason::cache);
  }
  auto d = p.route(6, concat(system, seq(900, 8)));  // 4 > 3 x 1 and 4 - 1 > 0
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(d->instance, hot->instance);
  EXPECT_EQ(d->reason, RouteReason::load);
}

TEST(RouterPolicy, MatchRatioMustExceedTheThreshold) {
  // 30 of 100 tokens match: a ratio of exactly 0.3.
  const auto shared = seq(0, 30);
  const auto prompt = concat(shared, seq(5000, 70));
  {
    RouterPolicy p(cache_aware(0.3), 2);
    auto a = p.route(1, concat(shared, seq(9000, 70)));
    ASSERT_TRUE(a.has_value());
    auto at = p.choose(prompt);
    ASSERT_TRUE(at.has_value());
    EXPECT_EQ(at->reason, RouteReason::load) << "0.3 is not above 0.3";
    EXPECT_NE(at->instance, a->instance) << "the least loaded";
  }
  {
    RouterPolicy p(cache_aware(0.29), 2);
    auto a = p.route(1, concat(shared, seq(9000, 70)));
    ASSERT_TRUE(a.has_value());
    auto above = p.choose(prompt);
    ASSERT_TRUE(above.has_value());
    EXPECT_EQ(above->reason, RouteReason::cache);
    EXPECT_EQ(above->instance, a->instance);
    EXPECT_EQ(above->matched_tokens, 30);
  }
  {
    RouterPolicy p(cache_aware(1.0), 2);  // threshold 1: never by cache
    auto a = p.route(1, prompt);
    ASSERT_TRUE(a.has_value());
    auto again = p.choose(prompt);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->reason, RouteReason::load);
  }
  {
    RouterPolicy p(cache_aware(0.0), 2);  // threshold 0: any match
    ASSERT_TRUE(p.route(1, prompt).has_value());
    auto one = p.choose(concat(seq(0, 1), seq(70000, 99)));
    ASSERT_TRUE(one.has_value());
    EXPECT_EQ(one->reason, RouteReason::cache);
    auto none = p.choose(seq(80000, 100));
    ASSERT_TRUE(none.has_value());
    EXPECT_EQ(none->reason, RouteReason::load) << "no match is not above 0";
  }
}

TEST(RouterPolicy, ChooseChangesNothing) {
  RouterPolicy p(cache_aware(), 2);
  auto c = p.choose(seq(0, 10));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(p.load(c->instance).n_requests, 0);
  EXPECT_EQ(p.tree(c->instance).n_tokens(), 0);
  EXPECT_FALSE(p.owner(1).has_value());
}

TEST(RouterPolicy, LoadCountsRequestsAndPendingPromptTokens) {
  RouterConfig c;
  c.policy = "least_load";
  RouterPolicy p(c, 2);
  auto a = p.route(1, seq(0, 100));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(p.load(a->instance).n_pending_prompt_tokens, 100);
  auto b = p.route(2, seq(0, 10));
  ASSERT_TRUE(b.has_value());
  EXPECT_NE(a->instance, b->instance) << "least_load ignores the shared prefix";
  p.prefilled(1);
  p.prefilled(1);  // repeats change nothing
  EXPECT_EQ(p.load(a->instance).n_pending_prompt_tokens, 0);
  EXPECT_EQ(p.load(a->instance).n_requests, 1);
  // Both hold one request; b's instance still has 10 tokens to prefill: a's goes first.
  auto d = p.route(3, seq(0, 5));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->instance, a->instance);
  EXPECT_EQ(d->reason, RouteReason::load);
  EXPECT_FALSE(p.route(3, seq(0, 5)).has_value()) << "an id in flight";
  p.finished(3);
  p.finished(3);
  p.finished(99);  // unknown: ignored
  EXPECT_EQ(p.load(a->instance).n_requests, 1);
}

// The members of an admit group (a beam search's step) go where its first member went, so one
// scheduler admits them together; requests outside it take their turns as usual. Once the group
// is complete its id means nothing; a member whose instance went down is routed afresh.
TEST(RouterPolicy, AnAdmitGroupGoesToOneInstance) {
  RouterConfig c;
  c.policy = "round_robin";
  RouterPolicy p(c, 3);
  auto first = p.route(1, seq(0, 10), 0, {}, /*group=*/40, /*group_size=*/3);
  ASSERT_TRUE(first.has_value());
  auto other = p.route(2, seq(0, 10));
  auto second = p.route(3, seq(50, 10), 0, {}, 40, 3);
  auto third = p.route(4, seq(90, 10), 0, {}, 40, 3);
  ASSERT_TRUE(other.has_value() && second.has_value() && third.has_value());
  EXPECT_EQ(second->instance, first->instance);
  EXPECT_EQ(third->instance, first->instance);
  EXPECT_NE(other->instance, first->instance) << "round robin went on for the others";
  EXPECT_EQ(p.load(first->instance).n_requests, 3);
  auto again = p.route(5, seq(0, 10), 0, {}, 40, 3);  // a new group of the same id: routed afresh
  ASSERT_TRUE(again.has_value());
  auto g1 = p.route(6, seq(0, 10), 0, {}, 41, 2);
  ASSERT_TRUE(g1.has_value());
  p.instance_down(g1->instance);
  auto g2 = p.route(7, seq(0, 10), 0, {}, 41, 2);
  ASSERT_TRUE(g2.has_value());
  EXPECT_NE(g2->instance, g1->instance) << "not to an instance that is down";
}

TEST(RouterPolicy, RoundRobinTakesTurns) {
  RouterConfig c;
  c.policy = "round_robin";
  RouterPolicy p(c, 3);
  std::vector<int> got;
  for (uint64_t id = 1; id <= 6; ++id) {
    auto d = p.route(id, seq(0, 10));  // the same prompt: no affinity
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->reason, RouteReason::round_robin);
    got.push_back(d->instance);
  }
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  p.instance_down(1);
  auto d = p.route(7, seq(0, 10));
  auto e = p.route(8, seq(0, 10));
  ASSERT_TRUE(d.has_value() && e.has_value());
  EXPECT_EQ(d->instance, 0);
  EXPECT_EQ(e->instance, 2) << "skips the instance that is down";
}

TEST(RouterPolicy, AStoppedInstanceGetsNothingAndGivesBackItsRequests) {
  RouterPolicy p(cache_aware(), 2);
  const auto system = seq(0, 64);
  auto a = p.route(1, concat(system, seq(500, 8)));
  auto b = p.route(2, concat(system, seq(600, 8)));
  ASSERT_TRUE(a.has_value() && b.has_value());
  ASSERT_EQ(a->instance, b->instance);
  const int dead = a->instance;
  EXPECT_EQ(p.instance_down(dead), (std::vector<uint64_t>{1, 2}));
  EXPECT_FALSE(p.up(dead));
  EXPECT_EQ(p.load(dead).n_requests, 0);
  EXPECT_FALSE(p.owner(1).has_value());
  auto c = p.route(3, concat(system, seq(700, 8)));  // its prefix lives only on the dead one
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->instance, 1 - dead);
  p.instance_down(1 - dead);
  auto none = p.route(4, seq(0, 8));
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("no instance is serving"), std::string::npos);
}

// A remote instance whose node came back serves again, with a cold prefix tree: the prefix it
// held before it went is not sent there for the cache.
TEST(RouterPolicy, AnInstanceThatComesBackStartsWithAnEmptyTree) {
  RouterPolicy p(cache_aware(), 2);
  const auto system = seq(0, 64);
  auto a = p.route(1, concat(system, seq(500, 8)));
  ASSERT_TRUE(a.has_value());
  const int back = a->instance;
  p.finished(1);
  p.instance_down(back);
  EXPECT_EQ(p.tree(back).match(system), 64) << "down keeps the tree until the instance comes back";
  p.instance_up(back);
  EXPECT_TRUE(p.up(back));
  EXPECT_EQ(p.tree(back).match(system), 0);
  EXPECT_EQ(p.tree(back).n_tokens(), 0);
  p.instance_up(back);  // twice changes nothing
  auto b = p.route(2, concat(system, seq(600, 8)));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->matched_tokens, 0) << "no instance holds the system prompt any more";
}

}  // namespace
}  // namespace brigade
