// Mamba1, Mamba2 and the Granite 4.0-H and Nemotron-H hybrids (models/state_space.h) served through the whole
// engine: the transformers fixtures of scripts/make_fixtures.py give transformers' greedy tokens
// through the scheduler's chunked prefill, alone and all at once, with more requests than the
// state memory holds slots for (max_running is lowered to them), and again (from the prefix
// cache's state snapshots: the same tokens as a full recompute, for repeats, next turns of a
// conversation and preempted sequences); what such an instance refuses.
#include <gtest/gtest.h>

#include <future>

#include "brigade/engine.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

// A fixture's checkpoint: its directory, or the GGUF file in it (gguf_*).
std::string model_path(const std::string& fixture) {
  return testing::fixture_dir(fixture) + (fixture.starts_with("gguf_") ? "/model.gguf" : "");
}

EngineOptions options(const std::string& fixture, int max_running = 8) {
  EngineOptions o = testing::test_engine_options(model_path(fixture), 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 1;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = 8;  // the 40-token prompt takes five steps, beside the others
  inst.scheduler.max_running = max_running;
  return o;
}

TEST(EngineStateSpace, GreedyTokensMatchTransformers) {
  for (const char* fixture :
       {"mamba2", "mamba2_bias", "granite_hybrid", "granite_hybrid_dense", "nemotron_h", "nemotron_h_moe", "mamba1",
        "falcon_mamba", "jamba",
        "qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_mm", "gguf_qwen35", "gguf_qwen35moe", "gguf_qwen3next", "lfm2",
        "lfm2_moe", "gguf_lfm2", "gguf_lfm2moe", "falcon_h1", "falcon_h1_norm",
        "gguf_falcon_h1", "gguf_mamba2", "gguf_nemotron_h", "gguf_granitehybrid", "gguf_nemotron_h_moe", "gguf_mamba1",
        "gguf_falcon_mamba", "gguf_jamba", "kimi_linear", "gguf_kimi_linear", "minimax"}) {
    SCOPED_TRACE(fixture);
    auto engine = testing::create_engine(options(fixture));
    ASSERT_TRUE(engine);
    EXPECT_TRUE(engine->model().generates);
    const auto cases = testing::read_fixture_cases(fixture);
    ASSERT_EQ(cases.size(), 3u);
    uint64_t hits = 0;
    for (int round = 0; round < 2; ++round)
      for (const auto& fc : cases) {
        auto c = engine->generate(testing::greedy_ids(fc.prompt, static_cast<int>(fc.greedy.size())));
        ASSERT_TRUE(c.has_value()) << c.status().to_string();
        EXPECT_EQ(c->token_ids, fc.greedy) << "round " << round << ", prompt of " << fc.prompt.size();
        // The same prompt again starts from the snapshot at its last page boundary before its
        // last token (pages of 8).
        const int cached = round == 1 ? (static_cast<int>(fc.prompt.size()) - 1) / 8 * 8 : 0;
        EXPECT_EQ(c->cached_tokens, cached) << "round " << round << ", prompt of " << fc.prompt.size();
        hits += static_cast<uint64_t>(cached);
      }
    const EngineStats st = engine->stats();
    EXPECT_EQ(st.cache_hit_tokens, hits);
    EXPECT_GT(st.cache_state_restores, 0u);
    EXPECT_GT(st.cache_state_snapshots, 0);
  }
}

// Tensor parallelism (executor tp 2: two CPU ranks, each with its heads of every mixer and its
// part of every sequence's state): transformers' greedy tokens, the three prompts run one by one
// and then together, and the second round from the state snapshots (each rank restoring its part).
TEST(EngineStateSpace, TwoTensorParallelRanksGiveTransformersTokens) {
  for (const char* fixture : {"mamba2_bias", "nemotron_h_moe", "granite_hybrid", "qwen3_next", "lfm2", "falcon_h1",
                              "gguf_nemotron_h", "jamba", "falcon_mamba", "kimi_linear", "minimax"}) {
    SCOPED_TRACE(fixture);
    EngineOptions o = options(fixture);
    o.topology.instances.front().executors.front().tp = 2;
    auto engine = testing::create_engine(o);
    ASSERT_TRUE(engine);
    const auto cases = testing::read_fixture_cases(fixture);
    for (int round = 0; round < 2; ++round)
      for (const auto& fc : cases) {
        auto c = engine->generate(testing::greedy_ids(fc.prompt, static_cast<int>(fc.greedy.size())));
        ASSERT_TRUE(c.has_value()) << c.status().to_string();
        EXPECT_EQ(c->token_ids, fc.greedy) << "round " << round << ", prompt of " << fc.prompt.size();
        EXPECT_EQ(c->cached_tokens, round == 1 ? (static_cast<int>(fc.prompt.size()) - 1) / 8 * 8 : 0);
      }
    std::vector<std::future<Expected<Completion>>> together;
    for (const auto& fc : cases)
      together.push_back(std::async(std::launch::async, [&engine, &fc] {
        return engine->generate(testing::greedy_ids(fc.prompt, static_cast<int>(fc.greedy.size())));
      }));
    for (size_t i = 0; i < cases.size(); ++i) {
      auto c = together[i].get();
      ASSERT_TRUE(c.has_value()) << c.status().to_string();
      EXPECT_EQ(c->token_ids, cases[i].greedy) << "batched, prompt of " << cases[i].prompt.size();
    }
    EXPECT_GT(engine->stats().cache_state_restores, 0u);
  }
}

// A conversation of three turns (each the last turn's prompt and answer, then more), a prompt
// that shares only part of the first, and a repeat, with state snapshots and without (cache.state_snapshots
// 0: every prompt computed whole): the same tokens; with them, the later turns start from the
// snapshot their earlier turn's decode left.
TEST(EngineStateSpace, CachedStatesGiveTheTokensOfAFullRecompute) {
  for (const char* fixture :
       {"mamba2", "granite_hybrid", "nemotron_h", "nemotron_h_moe", "mamba1", "jamba", "qwen3_next", "qwen3_5_moe",
        "gguf_qwen35", "lfm2", "lfm2_moe", "falcon_h1", "kimi_linear", "minimax"}) {
    SCOPED_TRACE(fixture);
    const auto cases = testing::read_fixture_cases(fixture);
    EngineOptions off = options(fixture);
    off.topology.instances.front().cache.state_snapshots = 0;
    auto cached = testing::create_engine(options(fixture));
    auto uncached = testing::create_engine(off);
    ASSERT_TRUE(cached && uncached);
    const std::vector<int32_t>& longest = cases[2].prompt;
    ASSERT_EQ(longest.size(), 40u);
    std::vector<int32_t> turn = longest;
    int computed = 0;  // the positions the last turn computed (its prompt and all but its last token)
    for (int t = 0; t < 4; ++t) {
      std::vector<int32_t> prompt = turn;
      if (t == 3) prompt = std::vector<int32_t>(longest.begin(), longest.begin() + 20);  // shares 20 tokens
      if (t == 3) prompt.insert(prompt.end(), cases[0].prompt.begin(), cases[0].prompt.end());
      auto a = cached->generate(testing::greedy_ids(prompt, 10));
      auto b = uncached->generate(testing::greedy_ids(prompt, 10));
      ASSERT_TRUE(a.has_value() && b.has_value());
      EXPECT_EQ(a->token_ids, b->token_ids) << "turn " << t;
      EXPECT_EQ(b->cached_tokens, 0);
      if (t == 1 || t == 2) {  // the last turn's decode left a snapshot at its last page boundary
        EXPECT_EQ(a->cached_tokens, computed / 8 * 8) << "turn " << t;
      }
      if (t == 3) {
        EXPECT_EQ(a->cached_tokens, 16);  // the first prompt's chunks left one at 16
      }
      computed = static_cast<int>(prompt.size() + a->token_ids.size()) - 1;
      turn.insert(turn.end(), a->token_ids.begin(), a->token_ids.end());
      turn.insert(turn.end(), cases[0].prompt.begin(), cases[0].prompt.end());
    }
    EXPECT_EQ(uncached->stats().cache_state_restores, 0u);
    EXPECT_GE(cached->stats().cache_state_restores, 3u);
  }
}

// 60 requests at once with max_running 64 and steps that admit them all: 1 MiB of kv.memory_mb
// holds 49 states of mamba2 (21 KiB each), a quarter of them snapshots, so the instance runs at
// most 37 and the rest wait; granite_hybrid's states get half of it (24 of them), its KV pages the
// rest (qwen3_next's, 9.6 KiB each, alike). Every request gets its tokens.
TEST(EngineStateSpace, MoreRequestsThanStateSlotsEachGetTheirTokens) {
  for (const char* fixture : {"mamba2", "granite_hybrid", "qwen3_next"}) {
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

// Prompts with a common system prompt (20 tokens, pages of 8, 28-token prompts in one step
// each, so each one's own snapshot is at 24): the second computes it and leaves a snapshot where
// it leaves the first's path (16, on the tree's page from the first: the snapshot joins the page
// the tree holds), the third and fourth start there; every one gets the tokens of a full
// recompute.
TEST(EngineStateSpace, PromptsWithACommonSystemPromptStartWhereTheyDiverge) {
  for (const char* fixture : {"mamba2", "granite_hybrid", "jamba", "qwen3_next"}) {
    SCOPED_TRACE(fixture);
    const auto cases = testing::read_fixture_cases(fixture);
    EngineOptions on = options(fixture), off = options(fixture);
    on.topology.instances.front().scheduler.max_step_tokens = 64;
    off.topology.instances.front().scheduler.max_step_tokens = 64;
    off.topology.instances.front().cache.state_snapshots = 0;
    auto cached = testing::create_engine(on);
    auto uncached = testing::create_engine(off);
    ASSERT_TRUE(cached && uncached);
    const std::vector<int32_t> system(cases[2].prompt.begin(), cases[2].prompt.begin() + 20);
    const int expected_cached[4] = {0, 0, 16, 16};
    for (int q = 0; q < 4; ++q) {
      std::vector<int32_t> prompt = system;
      prompt.push_back(cases[2].prompt[static_cast<size_t>(30 + q)]);  // each leaves the others here
      const auto& tail = cases[0].prompt;  // then 7 more: its own last snapshot is at 24, past the split
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      auto a = cached->generate(testing::greedy_ids(prompt, 6));
      auto b = uncached->generate(testing::greedy_ids(prompt, 6));
      ASSERT_TRUE(a.has_value() && b.has_value());
      EXPECT_EQ(a->token_ids, b->token_ids) << "prompt " << q;
      EXPECT_EQ(a->cached_tokens, expected_cached[q]) << "prompt " << q;
    }
  }
}

// Qwen3.5 as the Hub ships it loads its vision tower (prompts with images:
// engine_vision_qwen_test.cpp); an image without a grid is refused naming it, and the engine
// keeps serving text.
TEST(EngineStateSpace, Qwen35LoadsItsTowerAndRefusesABadImage) {
  auto engine = testing::create_engine(options("qwen3_5_mm"));
  ASSERT_TRUE(engine);
  EXPECT_TRUE(engine->model().takes_images());
  EXPECT_EQ(engine->model().image_merge, 2);
  const auto cases = testing::read_fixture_cases("qwen3_5_mm");
  GenerateOptions r = testing::greedy_ids(cases[0].prompt, 2);
  r.images = {ImagePixels{std::make_shared<const std::vector<float>>(3 * 16 * 16, 0.0f), 0, 0}};
  auto refused = engine->generate(r);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(refused.status().message().find("image 0 has a grid of 0 x 0 patches"), std::string::npos)
      << refused.status().to_string();
  auto ok = engine->generate(testing::greedy_ids(cases[0].prompt, 8));
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_EQ(ok->token_ids, cases[0].greedy);
}

// A snapshot count the memory cannot hold beside one running state is refused at start.
TEST(EngineStateSpace, RefusesMoreSnapshotsThanTheMemoryHolds) {
  EngineOptions o = options("mamba2");
  o.topology.instances.front().cache.state_snapshots = 49;  // 1 MiB holds 49 states
  auto e = Engine::create(o);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("state_snapshots"), std::string::npos) << e.status().to_string();
  o.topology.instances.front().cache.state_snapshots = 48;
  EXPECT_TRUE(Engine::create(o).has_value());
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
