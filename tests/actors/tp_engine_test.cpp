// The Engine with `tp: 2` on CPU (two executor ranks joined by the in-process communicator, rank 0
// sampling) gives the tokens of `tp: 1`: greedy for several prompts batched together, with steps
// in flight, and seeded sampling with penalties (whose state lives on rank 0 only).
#include <gtest/gtest.h>

#include <filesystem>

#include <unistd.h>

#include "brigade/engine.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

// A synthetic llama (8 heads, 4 kv heads: tp 1, 2 and 4 divide it), written once per process.
std::string synthetic_llama() {
  static const std::string dir = [] {
    const fs::path p = fs::temp_directory_path() / ("brigade_tp_engine_" + std::to_string(::getpid()));
    SyntheticModelSpec s = testing::tiny_llama(320, 256, 5);
    s.n_heads = 8;
    s.n_kv_heads = 4;
    const Status st = write_synthetic_model(s, p.string());
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    return p.string();
  }();
  return dir;
}

std::string fixture(const std::string& name) { return std::string(BRIGADE_FIXTURES) + "/" + name; }

EngineOptions options(const std::string& model, int tp, int inflight = 2) {
  EngineOptions o = testing::test_engine_options(model, 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 16;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = 32;  // long prompts take several chunked-prefill steps
  inst.scheduler.max_inflight_steps = inflight;
  inst.executors.front().tp = tp;
  return o;
}

std::vector<GenerateOptions> requests(bool sampled) {
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 17, 200, 3, 99}, {5}, {7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
                                 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48},
      {250, 251, 4, 4, 4, 4}};
  std::vector<GenerateOptions> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateOptions r;
    r.prompt_ids = prompts[i];
    r.max_tokens = 12;
    r.ignore_eos = true;
    if (sampled) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.frequency_penalty = 0.5f;
      r.sampling.seed = 1000 + i;
    } else {
      r.sampling.temperature = 0.0f;
    }
    out.push_back(r);
  }
  return out;
}

std::vector<std::vector<int32_t>> run(const EngineOptions& o, bool sampled) {
  auto engine = Engine::create(o);
  EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
  if (!engine) return {};
  return testing::generate_all(**engine, requests(sampled));
}

class TpEngine : public ::testing::TestWithParam<std::string> {
 protected:
  std::string model() const { return GetParam() == "synthetic" ? synthetic_llama() : fixture(GetParam()); }
};

TEST_P(TpEngine, Tp2GivesTheGreedyTokensOfTp1) {
  const auto want = run(options(model(), 1), false);
  ASSERT_EQ(want.size(), 4u);
  for (const auto& t : want) ASSERT_EQ(t.size(), 12u);
  EXPECT_EQ(run(options(model(), 2), false), want);
}

INSTANTIATE_TEST_SUITE_P(Models, TpEngine, ::testing::Values("synthetic", "qwen2", "qwen3"));

TEST(TpEngine, InFlightDepthAndRankCountDoNotChangeTokens) {
  const auto want = run(options(synthetic_llama(), 1, 1), false);
  EXPECT_EQ(run(options(synthetic_llama(), 2, 1), false), want);
  EXPECT_EQ(run(options(synthetic_llama(), 2, 3), false), want);
  EXPECT_EQ(run(options(synthetic_llama(), 4, 2), false), want);
}

TEST(TpEngine, SeededSamplingWithPenaltiesMatchesTp1) {
  const auto want = run(options(synthetic_llama(), 1), true);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(run(options(synthetic_llama(), 2), true), want);
}

// Speculative decoding under tp: rank 0 verifies the drafts, followers compute their k + 1
// positions like any chunk. The prompt {250, 251, 4, 4, 4, 4} gives drafts from the first decode.
TEST(TpEngine, DraftsVerifiedUnderTpGiveTheTokensOfTp1) {
  for (bool sampled : {false, true}) {
    const auto want = run(options(synthetic_llama(), 1), sampled);
    EngineOptions o = options(synthetic_llama(), 2);
    o.topology.instances.front().scheduler.speculative.method = "ngram";
    o.topology.instances.front().scheduler.speculative.min_acceptance = 0.0;
    auto engine = Engine::create(o);
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    EXPECT_EQ(testing::generate_all(**engine, requests(sampled)), want) << (sampled ? "seeded" : "greedy");
    EXPECT_GT((*engine)->stats().spec_draft_tokens, 0u);
  }
}

TEST(TpEngine, ATpThatSplitsAHeadIsRefusedAtCreate) {
  auto engine = Engine::create(options(synthetic_llama(), 3));
  ASSERT_FALSE(engine.has_value());
  EXPECT_EQ(engine.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(engine.status().message().find("valid tp for this model: 1, 2, 4"), std::string::npos)
      << engine.status().message();
}

}  // namespace
}  // namespace brigade
