// Gemma 4's language model (models/gemma4.h) served through the whole engine: the transformers
// fixtures of scripts/make_gemma4_fixtures.py give transformers' greedy tokens through the
// scheduler's chunked prefill on every executor variant (host and device step paths, n-gram
// speculation, prefill/decode separation, whose hand-off moves the pool's mixed-shape pages), and
// again from pages that went to the disk tier and came back (KvLayout::layer_shapes' page bytes).
#include <gtest/gtest.h>

#include <filesystem>

#include "brigade/engine.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFixtures[] = {"gemma4_dense", "gemma4_e2b", "gemma4_moe", "gemma4_mm"};

TEST(EngineGemma4, GreedyTokensMatchTransformersOnEveryVariant) {
  for (const char* fixture : kFixtures) {
    EngineOptions base = testing::chunked_engine_options(testing::fixture_dir(fixture));
    base.topology.instances.front().scheduler.max_step_tokens = 8;  // the 40-token prompt takes five steps
    const auto cases = testing::read_fixture_cases(fixture);
    ASSERT_EQ(cases.size(), 3u);
    for (const auto& [name, options] : testing::variants(base)) {
      SCOPED_TRACE(std::string(fixture) + ", " + name);
      auto engine = testing::create_engine(options);
      ASSERT_TRUE(engine);
      for (const auto& fc : cases) {
        auto c = engine->generate(testing::greedy_ids(fc.prompt, static_cast<int>(fc.greedy.size())));
        ASSERT_TRUE(c.has_value()) << c.status().to_string();
        EXPECT_EQ(c->token_ids, fc.greedy) << "prompt of " << fc.prompt.size();
      }
    }
  }
}

// Pages of both geometries written through to the host and disk tiers, the device cache and host
// tier reset, the long prompt again: its prefix comes back from disk and gives the same tokens.
TEST(EngineGemma4, PagesBackFromTheDiskTierGiveTransformersTokens) {
  for (const char* fixture : {"gemma4_dense", "gemma4_e2b"}) {
    SCOPED_TRACE(fixture);
    const fs::path dir = fs::temp_directory_path() / ("brigade_gemma4_tier_" + std::to_string(::getpid()) + fixture);
    fs::remove_all(dir);
    EngineOptions o = testing::chunked_engine_options(testing::fixture_dir(fixture));
    o.topology.instances.front().cache.host_bytes = 1 << 20;
    o.topology.instances.front().cache.disk_path = dir.string();
    auto engine = testing::create_engine(o);
    ASSERT_TRUE(engine);
    const auto fc = testing::read_fixture_cases(fixture).back();
    auto first = engine->generate(testing::greedy_ids(fc.prompt, static_cast<int>(fc.greedy.size())));
    ASSERT_TRUE(first.has_value()) << first.status().to_string();
    EXPECT_EQ(first->token_ids, fc.greedy);
    ASSERT_TRUE(testing::eventually(*engine, [](const EngineStats& s) { return s.tier_disk_bytes_used > 0; }));
    ASSERT_TRUE(engine->reset_prefix_cache().has_value());
    auto again = engine->generate(testing::greedy_ids(fc.prompt, static_cast<int>(fc.greedy.size())));
    ASSERT_TRUE(again.has_value()) << again.status().to_string();
    EXPECT_EQ(again->token_ids, fc.greedy);
    EXPECT_GT(again->cached_tokens, 0) << "the prefix came back from disk";
    EXPECT_GT(engine->stats().tier_disk_hit_pages, 0u);
    engine.reset();
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace brigade
