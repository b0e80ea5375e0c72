// LoRA adapters through the whole engine (GenerateOptions::lora), against transformers + PEFT
// (tests/fixtures/lora, scripts/make_lora_fixtures.py): greedy tokens of base and adapter
// requests sharing steps on every executor path, the prefix cache keeping adapters apart, and
// the refusals.
#include <gtest/gtest.h>

#include "brigade/engine.h"
#include "tests/actors/lora_test_util.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

EngineOptions lora_options() {
  EngineOptions o = testing::test_engine_options(testing::fixture_dir("llama"), 1);
  o.lora_modules = {{"all", testing::fixture_dir("lora/all_r4")}, {"rs", testing::fixture_dir("lora/rslora_qv")}};
  return o;
}

using testing::greedy_under;

// Base, adapter "all" and adapter "rs" on every fixture prompt, all submitted together so they
// share steps; each must give its own reference's greedy tokens.
TEST(EngineLora, MixedRequestsMatchTheirReferencesOnEveryPath) {
  for (const auto& [name, options] : testing::variants(lora_options())) {
    SCOPED_TRACE(name);
    auto engine = testing::create_engine(options);
    ASSERT_NE(engine, nullptr);
    testing::expect_lora_mix(*engine);
  }
}

// The long prompt (40 tokens: two whole pages of 16) first under the base, then under an
// adapter: the adapter must not take the base's cached pages (their K/V are the base's), so its
// first token's logprob is the PEFT reference's. A second adapter request does hit its own pages.
TEST(EngineLora, PrefixCacheKeepsAdaptersApart) {
  const auto all = testing::read_fixture_cases("lora/all_r4");
  const testing::FixtureCase& fc = all.back();
  ASSERT_GE(fc.prompt.size(), 32u);
  auto engine = testing::create_engine(lora_options());
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->generate(greedy_under(fc.prompt, 2, "")).has_value());
  const uint64_t hits_before = engine->stats().cache_hit_tokens;
  GenerateOptions r = greedy_under(fc.prompt, 1, "all");
  r.logprobs = 0;
  auto c = engine->generate(r);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(engine->stats().cache_hit_tokens, hits_before) << "the adapter took the base's pages";
  ASSERT_EQ(c->token_ids.size(), 1u);
  EXPECT_EQ(c->token_ids[0], fc.greedy[0]);
  ASSERT_EQ(c->logprobs.size(), 1u);
  EXPECT_NEAR(c->logprobs[0], testing::reference_logprob(fc.logits.back(), fc.greedy[0]), 2 * testing::kLogitTol);
  // The same prompt under the same adapter again: its own pages serve it, still matching PEFT.
  auto again = engine->generate(r);
  ASSERT_TRUE(again.has_value());
  EXPECT_GE(engine->stats().cache_hit_tokens, hits_before + 32);
  EXPECT_NEAR(again->logprobs[0], testing::reference_logprob(fc.logits.back(), fc.greedy[0]), 2 * testing::kLogitTol);
  // And the other adapter takes neither's pages.
  const uint64_t hits_rs = engine->stats().cache_hit_tokens;
  ASSERT_TRUE(engine->generate(greedy_under(fc.prompt, 1, "rs")).has_value());
  EXPECT_EQ(engine->stats().cache_hit_tokens, hits_rs);
}

TEST(EngineLora, UnknownAdapterIsRefusedNamingTheLoadedOnes) {
  auto engine = testing::create_engine(lora_options());
  ASSERT_NE(engine, nullptr);
  auto id = engine->submit(greedy_under({1, 2, 3}, 1, "nope"), [](const Event&) {});
  ASSERT_FALSE(id.has_value());
  EXPECT_EQ(id.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(id.status().message().find("loaded: all, rs"), std::string::npos) << id.status().to_string();
  ASSERT_EQ(engine->model().loras.size(), 2u);
  EXPECT_EQ(engine->model().loras[1].name, "rs");
}

TEST(EngineLora, StartRefusesMoreAdaptersThanMaxLoras) {
  EngineOptions o = lora_options();
  o.max_loras = 1;
  auto engine = Engine::create(o);
  ASSERT_FALSE(engine.has_value());
  EXPECT_NE(engine.status().message().find("exceed max_loras 1"), std::string::npos) << engine.status().to_string();
}

}  // namespace
}  // namespace brigade
