// An engine with two instances behind the router: the same greedy tokens as one instance,
// shared prefixes routed to one instance and served from its prefix cache, aborts reaching the
// owning instance, and an instance that dies while the other keeps serving.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "actors/engine/engine_testing.h"
#include "actors/engine/instance.h"
#include "brigade/engine.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

using testing::Outcomes;

class RouterEngine : public testing::TinyModelTest {
 protected:
  RouterEngine() : TinyModelTest("router_engine_test", 11) {}

  // n instances named i0, i1, ... with one thread each, behind a router of `policy`.
  EngineOptions options(int n, const std::string& policy) const {
    EngineOptions o = testing::test_engine_options(model(), 1);
    o.topology.instances.front().kv.memory_mb = 16;
    InstanceConfig proto = o.topology.instances.front();
    o.topology.instances.clear();
    for (int i = 0; i < n; ++i) {
      o.topology.instances.push_back(proto);
      o.topology.instances.back().name = std::to_string(i).insert(0, 1, 'i');
    }
    o.topology.router.policy = policy;
    return o;
  }


  // Submits every prompt at once and returns their greedy tokens in order.
  static std::vector<std::vector<int32_t>> run_batch(Engine& e, const std::vector<std::vector<int32_t>>& prompts) {
    Outcomes out;
    std::vector<uint64_t> ids;
    for (const auto& p : prompts) {
      auto id = e.submit(testing::greedy_ids(p, 12), out.callback());
      EXPECT_TRUE(id.has_value()) << id.status().to_string();
      if (id) ids.push_back(*id);
    }
    EXPECT_TRUE(out.wait(ids.size()));
    std::vector<std::vector<int32_t>> tokens;
    for (uint64_t id : ids) {
      EXPECT_EQ(out.get(id).finish, FinishReason::length) << out.error(id);
      tokens.push_back(out.get(id).token_ids);
    }
    return tokens;
  }

};

TEST_F(RouterEngine, TwoInstancesGiveOneInstancesGreedyTokens) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(prompt(i, 5 + 7 * i));
  auto one = Engine::create(options(1, "cache_aware"));
  ASSERT_TRUE(one.has_value()) << one.status().to_string();
  const auto expected = run_batch(**one, prompts);
  ASSERT_EQ(expected.size(), prompts.size());

  for (const std::string policy : {"round_robin", "cache_aware", "least_load"}) {
    auto two = Engine::create(options(2, policy));
    ASSERT_TRUE(two.has_value()) << two.status().to_string();
    EXPECT_EQ(run_batch(**two, prompts), expected) << policy;
    const auto per = (*two)->instance_stats();
    ASSERT_EQ(per.size(), 2u);
    EXPECT_EQ(per[0].name, "i0");
    EXPECT_EQ(per[1].name, "i1");
    for (const auto& inst : per) {
      EXPECT_TRUE(inst.serving);
      EXPECT_GT(inst.stats.requests_done, 0u) << policy << ": both instances served (" << inst.name << ")";
      EXPECT_GT(inst.routed_cache + inst.routed_load + inst.routed_round_robin, 0u);
    }
    const EngineStats sum = (*two)->stats();
    EXPECT_EQ(sum.requests_done, per[0].stats.requests_done + per[1].stats.requests_done);
    EXPECT_EQ(sum.requests_done, prompts.size());
    EXPECT_EQ(sum.kv_pages_total, per[0].stats.kv_pages_total + per[1].stats.kv_pages_total);
    EXPECT_EQ(sum.generated_tokens, 12 * prompts.size());
    if (policy == "round_robin") {
      EXPECT_EQ(per[0].routed_round_robin, 4u);
      EXPECT_EQ(per[1].routed_round_robin, 4u);
    }
  }
}

TEST_F(RouterEngine, ASharedPrefixGoesToOneInstanceAndHitsItsCache) {
  auto e = Engine::create(options(2, "cache_aware"));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  const auto system = prompt(100, 96);  // 6 pages of 16 tokens
  auto with_suffix = [&](int32_t s) {
    auto p = system;
    const auto tail = prompt(200 + s, 16);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  for (int32_t s = 0; s < 5; ++s) {  // one after another: each finds the last one's pages
    auto c = (*e)->generate(testing::greedy_ids(with_suffix(s), 4));
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
  }
  const auto per = (*e)->instance_stats();
  const int hot = per[0].stats.requests_done == 5 ? 0 : 1;
  EXPECT_EQ(per[static_cast<size_t>(hot)].stats.requests_done, 5u) << "all on one instance";
  EXPECT_EQ(per[static_cast<size_t>(1 - hot)].stats.requests_done, 0u);
  EXPECT_EQ(per[static_cast<size_t>(hot)].routed_cache, 4u) << "the first by load, the rest by cache";
  EXPECT_EQ(per[static_cast<size_t>(hot)].routed_load, 1u);
  EXPECT_GE(per[static_cast<size_t>(hot)].stats.cache_hit_tokens, 4u * 96u) << "each later prompt reused the prefix";
  EXPECT_GE((*e)->stats().cache_hit_tokens, 4u * 96u);
  // The prefix query asks the instance the router would pick: the one holding the prefix.
  auto cached = (*e)->cached_prefix_tokens(with_suffix(9));
  ASSERT_TRUE(cached.has_value()) << cached.status().to_string();
  EXPECT_GE(*cached, 96);

  // A distinct prompt goes to the other, idle instance.
  ASSERT_TRUE((*e)->generate(testing::greedy_ids(prompt(7, 40), 4)).has_value());
  EXPECT_EQ((*e)->instance_stats()[static_cast<size_t>(1 - hot)].stats.requests_done, 1u);
}

TEST_F(RouterEngine, AbortsReachTheOwningInstance) {
  auto e = Engine::create(options(2, "round_robin"));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  Outcomes out;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {  // two on each instance, each far longer than the test
    auto id = (*e)->submit(testing::greedy_ids(prompt(i, 8), 1900), out.callback());
    ASSERT_TRUE(id.has_value());
    ids.push_back(*id);
  }
  for (uint64_t id : ids) (*e)->cancel(id);
  ASSERT_TRUE(out.wait(ids.size()));
  for (uint64_t id : ids) {
    EXPECT_EQ(out.get(id).finish, FinishReason::abort);
    EXPECT_LT(out.get(id).token_ids.size(), 1900u);
  }
  for (const auto& inst : (*e)->instance_stats()) {
    EXPECT_EQ(inst.stats.requests_done, 2u) << inst.name;
    EXPECT_EQ(inst.stats.n_running + inst.stats.n_waiting, 0) << inst.name;
  }
}

TEST_F(RouterEngine, AnInstanceThatDiesFailsItsRequestsAndTheOtherKeepsServing) {
  auto e = Engine::create(options(2, "round_robin"));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  Outcomes out;
  const auto ids = submit_long(**e, 4, 1500, out);  // round robin: even positions on i0, odd on i1
  ASSERT_EQ(ids.size(), 4u);
  ASSERT_TRUE(wait_routed(**e, 4));
  ASSERT_TRUE(kill_instance_executor_for_testing(**e, 0).is_ok());
  EXPECT_FALSE(kill_instance_executor_for_testing(**e, 2).is_ok());
  ASSERT_TRUE(out.wait(ids.size())) << "every request ends, none hangs";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(out.get(ids[i]).finish, FinishReason::error) << "i0's request " << i;
      // The router's word ("instance 'i0' stopped"), or the scheduler's when it saw its step fail
      // before the link took it down ("executor failed").
      const std::string why = out.error(ids[i]);
      EXPECT_TRUE(why.find("instance 'i0' stopped") != std::string::npos || why.find("executor failed") != std::string::npos)
          << why;
    } else {
      EXPECT_EQ(out.get(ids[i]).finish, FinishReason::length) << "i1 serves on: " << out.error(ids[i]);
      EXPECT_EQ(out.get(ids[i]).token_ids.size(), 1500u);
    }
  }
  const auto per = (*e)->instance_stats();
  EXPECT_FALSE(per[0].serving);
  EXPECT_TRUE(per[1].serving);
  for (int i = 0; i < 3; ++i) {  // later requests all go to i1
    auto c = (*e)->generate(testing::greedy_ids(prompt(50 + i, 8), 4));
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    EXPECT_EQ(c->finish, FinishReason::length);
  }
  EXPECT_EQ((*e)->instance_stats()[1].routed_round_robin, 5u);
  auto cached = (*e)->cached_prefix_tokens(prompt(1, 8));
  EXPECT_TRUE(cached.has_value()) << "the query goes to the instance that serves";
}

// Each instance has tiers of its own (its own tier actor); stats() adds theirs up.
TEST_F(RouterEngine, EachInstanceHasItsOwnTiers) {
  EngineOptions o = options(2, "round_robin");
  for (auto& inst : o.topology.instances) inst.cache.host_bytes = 8 << 20;
  auto e = Engine::create(o);
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*e)->generate(testing::greedy_ids(prompt(i, 40), 4)).has_value());
  const auto per = (*e)->instance_stats();
  const EngineStats sum = (*e)->stats();
  EXPECT_TRUE(sum.tiers);
  for (const auto& inst : per) {
    EXPECT_TRUE(inst.stats.tiers);
    EXPECT_GT(inst.stats.tier_saved_pages, 0u) << inst.name << " saved its own pages (write_through)";
  }
  EXPECT_EQ(sum.tier_saved_pages, per[0].stats.tier_saved_pages + per[1].stats.tier_saved_pages);
}

// One instance has no router and no links: its scheduler outlives a dead executor and ends each
// request with the step's error rather than leaving it without a final event.
TEST_F(RouterEngine, ASingleInstanceWhoseExecutorDiedAnswersWithErrors) {
  auto e = Engine::create(options(1, "cache_aware"));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  ASSERT_TRUE((*e)->generate(testing::greedy_ids(prompt(1, 8), 4)).has_value());
  ASSERT_TRUE(kill_instance_executor_for_testing(**e, 0).is_ok());
  Outcomes out;
  auto id = (*e)->submit(testing::greedy_ids(prompt(2, 8), 4), out.callback());
  ASSERT_TRUE(id.has_value());
  ASSERT_TRUE(out.wait(1)) << "the request ends";
  EXPECT_EQ(out.get(*id).finish, FinishReason::error);
  EXPECT_NE(out.error(*id).find("executor failed"), std::string::npos) << out.error(*id);
  EXPECT_TRUE((*e)->instance_stats()[0].serving) << "without a router nothing marks it down";
}

// `threads: 0` shares the cores among every CPU rank of the engine; a count given stays.
TEST(InstanceThreads, ZeroSharesTheCoresAmongEveryCpuRank) {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  ExecutorConfig all;  // threads 0
  EXPECT_EQ(rank_threads(all, 1), 0) << "a lone rank takes every core (0 = all)";
  EXPECT_EQ(rank_threads(all, 2), std::max(1, hw / 2));
  EXPECT_EQ(rank_threads(all, 4 * hw), 1) << "never below one thread";
  ExecutorConfig three;
  three.threads = 3;
  EXPECT_EQ(rank_threads(three, 2), 3);
}

}  // namespace
}  // namespace brigade
