// An int4 checkpoint (scripts/make_int4_fixtures.py) serves through the whole engine: AutoAWQ's
// GEMM layout repacked to Q4_1 at load gives transformers' greedy tokens of every fixture prompt, at tp
// 1 and with two executor ranks (each unpacking its rows and columns of the packed layers), with
// the prompts submitted together; a GPTQ checkpoint repacked to Q4_0 serves too.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "models/mapped_file.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

std::string fixture(const std::string& name) { return std::string(BRIGADE_FIXTURES) + "/" + name; }

EngineOptions options(const std::string& model, int tp = 1, bool expert_parallel = false) {
  return testing::chunked_engine_options(model, tp, expert_parallel);
}

// expected.json's prompts and transformers' greedy tokens.
std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> reference(const std::string& name) {
  const auto j = nlohmann::json::parse(read_text_file(fixture(name) + "/expected.json").value());
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> out;
  for (const auto& c : j.at("cases"))
    out.emplace_back(c.at("prompt").get<std::vector<int32_t>>(), c.at("greedy").get<std::vector<int32_t>>());
  return out;
}

TEST(Int4Engine, AwqServesTransformersGreedyTokensAtTp1AndTp2) {
  const auto cases = reference("qwen3_awq_g32");
  ASSERT_FALSE(cases.empty());
  for (int tp : {1, 2}) {
    auto engine = testing::create_engine(options(fixture("qwen3_awq_g32"), tp));
    ASSERT_NE(engine, nullptr);
    std::vector<GenerateOptions> together;
    std::vector<std::vector<int32_t>> want;
    for (const auto& [prompt, greedy] : cases) {
      together.push_back(testing::greedy_ids(prompt, static_cast<int>(greedy.size())));
      want.push_back(greedy);
    }
    EXPECT_EQ(testing::generate_all(*engine, together), want) << "tp " << tp;
  }
}

TEST(Int4Engine, GptqRepackedToQ4_0Serves) {
  auto engine = testing::create_engine(options(fixture("qwen3_gptq_g32")));
  ASSERT_NE(engine, nullptr);
  const auto cases = reference("qwen3_gptq_g32");
  auto c = engine->generate(testing::greedy_ids(cases.front().first, 8));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids.size(), 8u);
  EXPECT_EQ(c->token_ids.front(), cases.front().second.front());  // not a near tie in this fixture (checked in models_test)
}

}  // namespace
}  // namespace brigade
