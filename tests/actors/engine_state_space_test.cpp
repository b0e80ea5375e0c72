// Mamba1, Mamba2 and the Granite 4.0-H and Nemotron-H hybrids (models/state_space.h) served through the whole
// engine: the transformers fixtures of scripts/make_fixtures.py give transformers' greedy tokens
// through the scheduler's chunked prefill, alone and all at once, with more requests than the
// state memory holds slots for (max_running is lowered to them), and again (nothing cached: each
// request computes its prompt); what such an instance refuses.
#include <gtest/gtest.h>

#include <future>

#include "brigade/engine.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

EngineOptions options(const std::string& fixture, int max_running = 8) {
  EngineOptions o = testing::test_engine_options(testing::fixture_dir(fixture), 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 1;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = 8;  // the 40-token prompt takes five steps, beside the others
  inst.scheduler.max_running = max_running;
  return o;
}

TEST(EngineStateSpace, GreedyTokensMatchTransformers) {
  for (const char* fixture :
       {"mamba2", "mamba2_bias", "granite_hybrid", "granite_hybrid_dense", "nemotron_h", "mamba1", "falcon_mamba", "jamba"}) {
    SCOPED_TRACE(fixture);
    auto engine = testing::create_engine(options(fixture));
    ASSERT_TRUE(engine);
    EXPECT_TRUE(engine->model().generates);
    const auto cases = testing::read_fixture_cases(fixture);
    ASSERT_EQ(cases.size(), 3u);
    for (int round = 0; round < 2; ++round)
      for (const auto& fc : cases) {
        auto c = engine->generate(testing::greedy_ids(fc.prompt, static_cast<int>(fc.greedy.size())));
        ASSERT_TRUE(c.has_value()) << c.status().to_string();
        EXPECT_EQ(c->token_ids, fc.greedy) << "round " << round << ", prompt of " << fc.prompt.size();
        EXPECT_EQ(c->cached_tokens, 0);  // the same prompt again computes it again
      }
    EXPECT_EQ(engine->stats().cache_hit_tokens, 0u);
  }
}

// 60 requests at once with max_running 64 and steps that admit them all: 1 MiB of kv.memory_mb
// holds 49 states of mamba2 (21 KiB each), so the instance runs at most 49 and the rest wait;
// granite_hybrid's states get half of it (24 of them), its KV pages the rest. Every request gets
// its tokens.
TEST(EngineStateSpace, MoreRequestsThanStateSlotsEachGetTheirTokens) {
  for (const char* fixture : {"mamba2", "granite_hybrid"}) {
    SCOPED_TRACE(fixture);
    EngineOptions o = options(fixture, 64);
    o.topology.instances.front().scheduler.max_step_tokens = 1024;  // every prompt admitted at once
    auto engine = testing::create_engine(o);
    ASSERT_TRUE(engine);
    const auto cases = testing::read_fixture_cases(fixture);
    constexpr int kRequests = 60;
    std::vector<std::future<Expected<Completion>>> done;
    for (int i = 0; i < kRequests; ++i) {
      const auto& fc = cases[static_cast<size_t>(i % 3)];
      done.push_back(std::async(std::launch::async, [&engine, &fc] {
        return engine->generate(testing::greedy_ids(fc.prompt, static_cast<int>(fc.greedy.size())));
      }));
    }
    for (int i = 0; i < kRequests; ++i) {
      auto c = done[static_cast<size_t>(i)].get();
      ASSERT_TRUE(c.has_value()) << "request " << i << ": " << c.status().to_string();
      EXPECT_EQ(c->token_ids, cases[static_cast<size_t>(i % 3)].greedy) << "request " << i;
    }
    EXPECT_EQ(engine->stats().n_running, 0);
  }
}

// A hybrid's attention pages run out: the scheduler preempts sequences (recompute), the executor
// frees their state slots, and each preempted sequence starts its state again from position 0.
// Eight short prompts that generate 40 tokens each in a pool of 80 positions get the tokens
// each gets alone in a roomy pool (whose first 8 are transformers').
TEST(EngineStateSpace, PreemptedSequencesStartTheirStateAgain) {
  const auto cases = testing::read_fixture_cases("granite_hybrid");
  std::vector<GenerateOptions> reqs;
  for (int i = 0; i < 8; ++i) {
    const auto& fc = cases[static_cast<size_t>(i % 2)];  // the 7- and 1-token prompts
    reqs.push_back(testing::greedy_ids(fc.prompt, 40));
  }
  auto roomy = testing::create_engine(options("granite_hybrid", 16));
  ASSERT_TRUE(roomy);
  std::vector<Completion> alone;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto c = roomy->generate(reqs[i]);
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    const auto& greedy = cases[i % 2].greedy;
    EXPECT_EQ(std::vector<int32_t>(c->token_ids.begin(), c->token_ids.begin() + 8), greedy) << "request " << i;
    alone.push_back(*c);
  }
  EngineOptions o = options("granite_hybrid", 16);
  o.topology.instances.front().kv.pages = 10;  // 80 positions for 8 sequences of up to 47
  auto tight = testing::create_engine(o);
  ASSERT_TRUE(tight);
  const auto together = testing::run_concurrently(*tight, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].token_ids, alone[i].token_ids) << "request " << i;
  EXPECT_GT(tight->stats().preemptions, 0u) << "the pool was too small for every sequence at once";
}

TEST(EngineStateSpace, RefusesSpeculationAndPdRoles) {
  EngineOptions spec = options("mamba2");
  spec.topology.instances.front().scheduler.speculative.method = "ngram";
  auto a = Engine::create(spec);
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.status().code(), StatusCode::unsupported);
  EXPECT_NE(a.status().message().find("recurrent state"), std::string::npos) << a.status().to_string();
  auto b = Engine::create(testing::prefill_decode(options("mamba2")));
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.status().code(), StatusCode::unsupported);
  EngineOptions mtp = options("mamba2");
  mtp.topology.instances.front().scheduler.speculative.method = "mtp";
  EXPECT_FALSE(Engine::create(mtp).has_value());
}

}  // namespace
}  // namespace brigade
