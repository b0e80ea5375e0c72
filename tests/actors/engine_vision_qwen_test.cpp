// Prompts with images of any size through the engine (the Qwen2-VL family, tests/fixtures/qwen2_vl
// and qwen2_5_vl): the scheduler finds each image's run of tokens by its grid, splits an image
// over chunks when a step has no room for it whole (its tokens attend causally), keys the prefix
// cache by the image and its grid, and sends every chunk and decode step the M-RoPE shift of the
// images before it. Checked against transformers' logits. Qwen3.5 (tests/fixtures/qwen3_5_vl and
// qwen3_5_moe_vl) runs the same requests on a Gated DeltaNet hybrid, whose prefix cache serves a
// match only where a state snapshot ends (docs/architecture.md, state snapshots).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <iterator>
#include <future>
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

// Runs c on engine expecting transformers' greedy tokens; cached_tokens of the run (-1 when it failed).
int expect_greedy(Engine& engine, const Fixture& f, const QwenVlCase& c) {
  return testing::expect_greedy_run(engine, request(f, c), c.greedy);
}

// Qwen3.5's language model keeps a recurrent state per sequence.
bool recurrent(const std::string& name) { return name.starts_with("qwen3_5"); }

class EngineVisionQwen : public ::testing::TestWithParam<const char*> {};

// Whole prompts in a step, chunks of at most 32 tokens (each image whole in a chunk) and of at
// most 7 (images of 24, 10 and 9 tokens cut over several steps): every prompt token scored as
// transformers scores it, and transformers' greedy continuation (decode steps shifted by the
// images).
TEST_P(EngineVisionQwen, PromptsWithImagesScoreAndContinueAsTransformers) {
  const Fixture f = read_fixture(GetParam());
  for (int step_tokens : {0, 32, 7}) {
    EngineOptions o = step_tokens > 0 ? testing::chunked_engine_options(fixture(GetParam())) : testing::test_engine_options(fixture(GetParam()), 2);
    if (step_tokens > 0) o.topology.instances.front().scheduler.max_step_tokens = step_tokens;
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
      EXPECT_LE(testing::prompt_logprob_error(done->prompt_logprobs, c.prompt, c.logits), 2e-3) << "steps of " << step_tokens << ", prompt of " << c.prompt.size();
      EXPECT_EQ(done->token_ids, c.greedy) << "steps of " << step_tokens << ", prompt of " << c.prompt.size();
    }
  }
}

// A prefix-cache match may end inside an image: the pages of a finished request's image tail are
// evicted by a text request, and the same request again reuses the pages up to the middle of the
// image; its chunk starts inside the image, whose features the tower computes again. The same
// tokens as transformers'.
TEST_P(EngineVisionQwen, APrefixMatchEndingInsideAnImageContinuesIt) {
  const Fixture f = read_fixture(GetParam());
  const QwenVlCase& c = f.cases[0];  // 4 text tokens, then its 24 image tokens at 4..27
  auto engine = create_engine(testing::small_cache_options(fixture(GetParam())));
  ASSERT_NE(engine, nullptr);
  testing::expect_prefix_match_inside_image(*engine, request(f, c), c.greedy, 4, 28);
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
  expect_greedy(*engine, f, c);
  EXPECT_EQ(expect_greedy(*engine, f, c), 32) << "every whole page, the image's included";

  GenerateOptions transposed = request(f, c);
  const ImagePixels& im = transposed.images[0];
  transposed.images[0] = {im.pixels, im.grid_w, im.grid_h};  // 12 x 8: 6 x 4 = 24 tokens too
  auto other = engine->generate(transposed);
  ASSERT_TRUE(other.has_value()) << other.status().to_string();
  // A recurrent model has no state snapshot at that page (its first run saved one at 32 only).
  EXPECT_EQ(other->cached_tokens, recurrent(GetParam()) ? 0 : 4) << "only the page before the image";
  auto fresh = create_engine(o);
  ASSERT_NE(fresh, nullptr);
  auto want = fresh->generate(transposed);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  EXPECT_EQ(other->token_ids, want->token_ids);
}

// A prefill instance (in chunks of 8 tokens, cutting the images) hands the sequence (its images'
// grids with it) to a decode instance, which decodes with the images' shift: the same tokens.
TEST_P(EngineVisionQwen, PrefillDecodeSeparationKeepsTheShift) {
  const Fixture f = read_fixture(GetParam());
  EngineOptions o = testing::prefill_decode(testing::test_engine_options(fixture(GetParam()), 1));
  o.topology.instances.front().scheduler.max_step_tokens = 8;  // the prefill instance cuts the images
  if (recurrent(GetParam())) {  // a state cannot move between instances: refused at start, naming why
    auto refused = Engine::create(o);
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.status().message().find("instance 'prefill': instance"), std::string::npos) << "named once";
    EXPECT_NE(refused.status().message().find("keeps a recurrent state per sequence"), std::string::npos)
        << refused.status().to_string();
    return;
  }
  auto engine = create_engine(o);
  ASSERT_NE(engine, nullptr);
  for (const QwenVlCase& c : f.cases) expect_greedy(*engine, f, c);
}

// Requests whose images cannot run are refused naming the problem; the engine keeps serving.
TEST_P(EngineVisionQwen, BadImageRequestsAreRefusedNamingTheProblem) {
  const Fixture f = read_fixture(GetParam());
  auto engine = create_engine(testing::test_engine_options(fixture(GetParam()), 1));
  ASSERT_NE(engine, nullptr);
  auto refused = [&](const GenerateOptions& r, const std::string& why) { testing::expect_refused(*engine, r, why); };
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
  expect_greedy(*engine, f, c);
}

// Engine::load_image keeps the processor's pixel bounds however small a step is: the 160 x 120
// PNG becomes smart_resize's 144 x 104 (36 x 26 patches, 234 tokens) in an engine of 16-token
// steps, and a prompt holding it runs, its image cut over 15 steps.
TEST_P(EngineVisionQwen, ImagesLargerThanAStepKeepTheProcessorsSize) {
  EngineOptions o = testing::chunked_engine_options(fixture(GetParam()));
  o.topology.instances.front().scheduler.max_step_tokens = 16;
  auto engine = create_engine(o);
  ASSERT_NE(engine, nullptr);
  std::ifstream in(fixture("images/large_160x120.png"), std::ios::binary);
  const std::vector<uint8_t> png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto image = engine->load_image(png);
  ASSERT_TRUE(image.has_value()) << image.status().to_string();
  EXPECT_EQ(image->grid_h, 26);
  EXPECT_EQ(image->grid_w, 36);
  GenerateOptions r;
  r.prompt_ids = {1, 2, testing::kQwenVisionStart};
  r.prompt_ids.insert(r.prompt_ids.end(), 13 * 18, testing::kQwenImageToken);
  r.prompt_ids.push_back(testing::kQwenVisionEnd);
  r.images = {*image};
  r.max_tokens = 2;
  r.ignore_eos = true;  // a sampled EOS (the default temperature 1) would end it after one
  auto done = engine->generate(r);
  ASSERT_TRUE(done.has_value()) << done.status().to_string();
  EXPECT_EQ(done->prompt_tokens, 238);
  EXPECT_EQ(done->token_ids.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVisionQwen,
                         ::testing::Values("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5_vl",
                                           "qwen3_5_moe_vl"));

}  // namespace
}  // namespace brigade
