// Prompts with images of any size through the engine (the Qwen2-VL family, tests/fixtures/qwen2_vl
// and qwen2_5_vl): the scheduler finds each image's run of tokens by its grid, never splits an
// image across chunks, keys the prefix cache by the image and its grid, and sends every chunk and
// decode step the M-RoPE shift of the images before it. Checked against transformers' logits.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "tests/engine_test_util.h"
#include "tests/vision_fixture.h"

namespace brigade {
namespace {

using testing::create_engine;

using testing::QwenVlCase;
using testing::QwenVlFixture;

std::string fixture(const std::string& name) { return std::string(BRIGADE_FIXTURES) + "/" + name; }

struct Fixture {
  std::vector<ImagePixels> images;
  std::vector<QwenVlCase> cases;
};

Fixture read_fixture(const std::string& name) {
  QwenVlFixture q = testing::read_qwen_vl_fixture(fixture(name));
  Fixture f;
  for (const auto& im : q.images) f.images.push_back({im.pixels, im.grid_h, im.grid_w});
  f.cases = std::move(q.cases);
  return f;
}

GenerateOptions request(const Fixture& f, const QwenVlCase& c, int max_tokens = 8) {
  GenerateOptions r;
  r.prompt_ids = c.prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  for (int k : c.images) r.images.push_back(f.images[static_cast<size_t>(k)]);
  return r;
}

class EngineVisionQwen : public ::testing::TestWithParam<const char*> {};

// Whole prompts in a step, and chunks of at most 32 tokens (max_step_tokens) which must carry
// each image whole: every prompt token scored as transformers scores it, and transformers'
// greedy continuation (decode steps shifted by the images).
TEST_P(EngineVisionQwen, PromptsWithImagesScoreAndContinueAsTransformers) {
  const Fixture f = read_fixture(GetParam());
  for (bool chunked : {false, true}) {
    EngineOptions o = chunked ? testing::chunked_engine_options(fixture(GetParam())) : testing::test_engine_options(fixture(GetParam()), 2);
    auto engine = create_engine(o);
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->model().image_merge, 2);
    EXPECT_TRUE(engine->model().takes_images());
    EXPECT_EQ(engine->model().image_size, 0);
    for (const QwenVlCase& c : f.cases) {
      GenerateOptions r = request(f, c);
      r.prompt_logprobs = 0;
      auto done = engine->generate(r);
      ASSERT_TRUE(done.has_value()) << done.status().to_string();
      EXPECT_LE(testing::prompt_logprob_error(done->prompt_logprobs, c.prompt, c.logits), 2e-3) << "chunked " << chunked << ", prompt of " << c.prompt.size();
      EXPECT_EQ(done->token_ids, c.greedy) << "chunked " << chunked << ", prompt of " << c.prompt.size();
    }
  }
}

// The prefix cache: the same prompt again is served from the cache with the same tokens; the same
// prompt with another image of the same token count (the grid transposed: other pixels' order,
// other positions) shares only the pages before the image.
TEST_P(EngineVisionQwen, ThePrefixCacheTellsImagesApart) {
  const Fixture f = read_fixture(GetParam());
  EngineOptions o = testing::test_engine_options(fixture(GetParam()), 1);
  o.topology.instances.front().kv.page_size = 4;
  auto engine = create_engine(o);
  ASSERT_NE(engine, nullptr);
  const QwenVlCase& c = f.cases[0];  // 4 text tokens, then its 24 image tokens at 4..27
  auto first = engine->generate(request(f, c));
  ASSERT_TRUE(first.has_value()) << first.status().to_string();
  EXPECT_EQ(first->token_ids, c.greedy);
  auto again = engine->generate(request(f, c));
  ASSERT_TRUE(again.has_value()) << again.status().to_string();
  EXPECT_EQ(again->token_ids, c.greedy);
  EXPECT_EQ(again->cached_tokens, 32) << "every whole page, the image's included";

  GenerateOptions transposed = request(f, c);
  const ImagePixels& im = transposed.images[0];
  transposed.images[0] = {im.pixels, im.grid_w, im.grid_h};  // 12 x 8: 6 x 4 = 24 tokens too
  auto other = engine->generate(transposed);
  ASSERT_TRUE(other.has_value()) << other.status().to_string();
  EXPECT_EQ(other->cached_tokens, 4) << "only the page before the image";
  auto fresh = create_engine(o);
  ASSERT_NE(fresh, nullptr);
  auto want = fresh->generate(transposed);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  EXPECT_EQ(other->token_ids, want->token_ids);
}

// A prefill instance hands the sequence (its images' grids with it) to a decode instance, which
// decodes with the images' shift: the same tokens.
TEST_P(EngineVisionQwen, PrefillDecodeSeparationKeepsTheShift) {
  const Fixture f = read_fixture(GetParam());
  auto engine = create_engine(testing::prefill_decode(testing::test_engine_options(fixture(GetParam()), 1)));
  ASSERT_NE(engine, nullptr);
  for (const QwenVlCase& c : f.cases) {
    auto done = engine->generate(request(f, c));
    ASSERT_TRUE(done.has_value()) << done.status().to_string();
    EXPECT_EQ(done->token_ids, c.greedy) << "prompt of " << c.prompt.size();
  }
}

// Requests whose images cannot run are refused naming the problem; the engine keeps serving.
TEST_P(EngineVisionQwen, BadImageRequestsAreRefusedNamingTheProblem) {
  const Fixture f = read_fixture(GetParam());
  auto engine = create_engine(testing::test_engine_options(fixture(GetParam()), 1));
  ASSERT_NE(engine, nullptr);
  auto refused = [&](GenerateOptions r, const std::string& why) {
    auto done = engine->generate(r);
    const std::string msg = done.has_value() ? "" : done.status().message();
    EXPECT_FALSE(done.has_value()) << why;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  };
  const QwenVlCase& c = f.cases[0];
  GenerateOptions odd = request(f, c);
  odd.images[0].grid_h = 7;
  refused(odd, "image 0 has a grid of 7 x 12 patches; each side must be a positive multiple of the merge size 2");
  GenerateOptions few = request(f, c);
  few.images[0].pixels = std::make_shared<const std::vector<float>>(100, 0.0f);
  refused(few, "image 0 of 8 x 12 patches must be");
  GenerateOptions other_grid = request(f, c);
  other_grid.images[0] = f.images[2];  // 6 x 6 patches: 9 tokens, not the prompt's 24
  refused(other_grid, "image 0 is exactly 9 image tokens");
  GenerateOptions none = request(f, c);
  none.images.clear();
  refused(none, "1 image(s) of image tokens but the request 0");
  auto ok = engine->generate(request(f, c));
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_EQ(ok->token_ids, c.greedy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVisionQwen, ::testing::Values("qwen2_vl", "qwen2_5_vl"));

}  // namespace
}  // namespace brigade
