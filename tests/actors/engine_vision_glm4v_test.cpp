// GLM-4.1V's and GLM-4.5V's images through the engine (tests/fixtures/glm4v and glm4v_moe, written
// by scripts/make_glm4v_fixtures.py): prompts holding <|begin_of_image|>, the image's <|image|>
// tokens and <|end_of_image|>, whole in a step and in chunks that cut the images, every prompt
// token scored as transformers scores it and transformers' greedy tokens (the decode steps shifted
// by the images' M-RoPE); a prefix-cache match ending inside an image; bad requests refused.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "tests/actors/vision_engine_util.h"
#include "tests/engine_test_util.h"
#include "tests/vision_fixture.h"

namespace brigade {
namespace {

using testing::create_engine;
using testing::QwenVlCase;

std::string fixture(const std::string& name) { return std::string(BRIGADE_FIXTURES) + "/" + name; }

std::vector<float> flatten(const nlohmann::json& rows) {
  std::vector<float> out;
  for (const auto& row : rows) for (float v : row.get<std::vector<float>>()) out.push_back(v);
  return out;
}

struct Fixture {
  std::vector<ImagePixels> images;
  std::vector<QwenVlCase> cases;
  std::vector<std::vector<double>> prompt_logprobs;  // per case, of prompt tokens 1.. (transformers')
};

// Both fixtures preprocess the same images; glm4v's expected.json holds their pixel rows.
Fixture read_fixture(const std::string& name) {
  const auto j = nlohmann::json::parse(read_text_file(fixture(name) + "/expected.json").value());
  const auto pixels = nlohmann::json::parse(read_text_file(fixture("glm4v") + "/expected.json").value());
  Fixture f;
  for (size_t i = 0; i < j.at("images").size(); ++i) {
    const auto thw = j.at("images")[i].at("grid_thw").get<std::vector<int>>();
    f.images.push_back({std::make_shared<const std::vector<float>>(flatten(pixels.at("images")[i].at("pixel_values"))),
                        thw.at(1), thw.at(2)});
  }
  for (const auto& c : j.at("cases"))
    f.cases.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                       c.at("logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>(),
                       c.at("position_ids").get<std::vector<std::vector<int32_t>>>(), c.at("rope_delta").get<int32_t>()});
  for (const auto& c : j.at("cases")) f.prompt_logprobs.push_back(c.at("prompt_logprobs").get<std::vector<double>>());
  return f;
}

GenerateOptions request(const Fixture& f, const QwenVlCase& c) {
  GenerateOptions r;
  r.prompt_ids = c.prompt;
  r.max_tokens = static_cast<int>(c.greedy.size());
  r.ignore_eos = true;  // transformers' greedy tokens run past any EOS
  r.sampling.temperature = 0.0f;
  for (int k : c.images) r.images.push_back(f.images[static_cast<size_t>(k)]);
  return r;
}

class EngineVisionGlm4v : public ::testing::TestWithParam<const char*> {};

// Whole prompts in a step, chunks of at most 16 tokens and of at most 7 (image 0's 20 tokens cut
// over several steps).
TEST_P(EngineVisionGlm4v, PromptsWithImagesScoreAndContinueAsTransformers) {
  const Fixture f = read_fixture(GetParam());
  for (int step_tokens : {0, 16, 7}) {
    EngineOptions o = step_tokens > 0 ? testing::chunked_engine_options(fixture(GetParam()))
                                      : testing::test_engine_options(fixture(GetParam()), 2);
    if (step_tokens > 0) o.topology.instances.front().scheduler.max_step_tokens = step_tokens;
    auto engine = create_engine(o);
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->model().image_merge, 2);
    EXPECT_TRUE(engine->model().takes_images());
    for (size_t k = 0; k < f.cases.size(); ++k) {
      const QwenVlCase& c = f.cases[k];
      GenerateOptions r = request(f, c);
      r.prompt_logprobs = 0;
      auto done = engine->generate(r);
      ASSERT_TRUE(done.has_value()) << done.status().to_string();
      ASSERT_EQ(done->prompt_logprobs.size(), c.prompt.size());
      double worst = 0.0;
      for (size_t q = 1; q < c.prompt.size(); ++q) {
        const auto& lp = done->prompt_logprobs[q].logprob;
        worst = std::max(worst, lp ? std::fabs(*lp - f.prompt_logprobs[k][q - 1]) : INFINITY);
      }
      EXPECT_LE(worst, 2e-3) << "steps of " << step_tokens << ", prompt of " << c.prompt.size();
      EXPECT_EQ(done->token_ids, c.greedy) << "steps of " << step_tokens << ", prompt of " << c.prompt.size();
    }
  }
}

// Case 0: 3 text tokens and <|begin_of_image|>, then image 0's 20 tokens at 4..23.
TEST_P(EngineVisionGlm4v, APrefixMatchEndingInsideAnImageContinuesIt) {
  const Fixture f = read_fixture(GetParam());
  auto engine = create_engine(testing::small_cache_options(fixture(GetParam())));
  ASSERT_NE(engine, nullptr);
  testing::expect_prefix_match_inside_image(*engine, request(f, f.cases[0]), f.cases[0].greedy, 4, 24);
}

TEST_P(EngineVisionGlm4v, BadImageRequestsAreRefusedNamingTheProblem) {
  const Fixture f = read_fixture(GetParam());
  auto engine = create_engine(testing::test_engine_options(fixture(GetParam()), 1));
  ASSERT_NE(engine, nullptr);
  const QwenVlCase& c = f.cases[0];
  GenerateOptions other_grid = request(f, c);
  other_grid.images[0] = f.images[1];  // 16 x 4 patches: 16 tokens, not the prompt's 20
  testing::expect_refused(*engine, other_grid, "image 0 is exactly 16 image tokens");
  GenerateOptions none = request(f, c);
  none.images.clear();
  testing::expect_refused(*engine, none, "2 image(s) of image tokens but the request 0");
  testing::expect_greedy_run(*engine, request(f, c), c.greedy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVisionGlm4v, ::testing::Values("glm4v", "glm4v_moe"));

}  // namespace
}  // namespace brigade
