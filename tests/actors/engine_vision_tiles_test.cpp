// Tiled images through the engine: Idefics3's and SmolVLM's (tests/fixtures/idefics3 and smolvlm,
// written by scripts/make_idefics3_fixtures.py: tiny Idefics3ForConditionalGeneration /
// SmolVLMForConditionalGeneration checkpoints and transformers' greedy tokens) and Aya Vision's
// (tests/fixtures/aya_vision, scripts/make_aya_vision_fixtures.py). Engine::load_image runs the
// model's processor on the PNGs (Idefics3ImageProcessor: the image's tiles row by row and the global
// tile, its grid rows x cols tiles of 8 x 8 patches, smolvlm's unsplit; Aya Vision's
// GotOcr2ImageProcessor: a column of tiles, the thumbnail last), the tokenizer station writes each
// image's text as the model's processor does (Idefics3Processor: <fake_token_around_image>,
// <row_R_col_C>, "\n", <global-img>; AyaVisionProcessor: <|START_OF_IMG|>, TILE_k, TILE_GLOBAL,
// <|END_OF_IMG|>) and makes each tile an image of its own, for text and token-id prompts alike; the
// scheduler finds each tile's run of image tokens and cuts them over chunks anywhere.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "tests/actors/vision_engine_util.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

using testing::create_engine;

const std::string kFixtures = std::string(BRIGADE_FIXTURES) + "/";
constexpr int kSide = 8;  // patches a tile's side

struct Idefics3Case {
  std::string text;         // chats: the chat template's text, `<image>` where each image goes
  std::vector<int32_t> prompt;
  std::vector<int> images;  // fixture images, in the prompt's order
  std::vector<int32_t> greedy;
};

nlohmann::json expected(const std::string& fixture) {
  std::ifstream in(kFixtures + fixture + "/expected.json");
  return nlohmann::json::parse(in);
}

// expected.json's `cases` (key "cases") or `chats` (key "chats").
std::vector<Idefics3Case> read_cases(const std::string& fixture, const char* key) {
  std::vector<Idefics3Case> out;
  const nlohmann::json j = expected(fixture);  // kept: a range-for over a temporary's member would dangle
  for (const auto& c : j.at(key)) {
    Idefics3Case ic{c.value("text", ""), c.at("prompt").get<std::vector<int32_t>>(), {},
                    c.at("greedy").get<std::vector<int32_t>>()};
    if (c.contains("images")) ic.images = c.at("images").get<std::vector<int>>();
    for (const auto& part : c.value("parts", nlohmann::json::array()))
      if (part.is_number()) ic.images.push_back(part.get<int>());
    out.push_back(std::move(ic));
  }
  EXPECT_FALSE(out.empty()) << fixture << ": no " << key;
  return out;
}

auto steps_engine(const std::string& dir, int step_tokens) {
  EngineOptions o = step_tokens > 0 ? testing::chunked_engine_options(dir) : testing::test_engine_options(dir, 2);
  if (step_tokens > 0) o.topology.instances.front().scheduler.max_step_tokens = step_tokens;
  return create_engine(o);
}

class EngineVisionTiles : public ::testing::TestWithParam<std::string> {};

// Whole prompts, steps of 32 and of 7 tokens (the tiles cut anywhere): the PNGs load as their
// tiles, and every token-id prompt (each image's processor text and runs) continues as
// transformers' does.
TEST_P(EngineVisionTiles, PromptsWithImagesContinueAsTransformers) {
  const std::string dir = kFixtures + GetParam();
  const auto cases = read_cases(GetParam(), "cases");
  const nlohmann::json want = expected(GetParam()).at("images");
  for (int step_tokens : {0, 32, 7}) {
    auto engine = steps_engine(dir, step_tokens);
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(engine->model().takes_images());
    const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 3);
    ASSERT_EQ(images.size(), 3u);
    for (size_t k = 0; k < images.size(); ++k) {
      const bool column = !want[k].contains("rows");  // Aya Vision: a column of GotOcr2's tiles
      const int rows = column ? want[k].at("n_tiles").get<int>() : want[k].at("rows").get<int>();
      const int cols = column ? 1 : want[k].at("cols").get<int>();
      EXPECT_EQ(images[k].grid_h, std::max(rows, 1) * kSide) << "image " << k;
      EXPECT_EQ(images[k].grid_w, std::max(cols, 1) * kSide) << "image " << k;
      EXPECT_EQ(images[k].pixels->size(), want[k].at("n_tiles").get<size_t>() * 3 * 32 * 32) << "image " << k;
    }
    for (const Idefics3Case& c : cases)
      testing::expect_greedy_run(*engine, testing::greedy_image_request(images, c.prompt, c.images, c.greedy), c.greedy,
                                 "steps of " + std::to_string(step_tokens) + ", ");
  }
}

// The chats' text (the template's, `<image>` where each image goes): the tokenizer station expands
// each image as Idefics3Processor does, so the prompt is the processor's length and the tokens
// transformers'.
TEST_P(EngineVisionTiles, ChatTextExpandsEachImageAsTheProcessorDoes) {
  const std::string dir = kFixtures + GetParam();
  auto engine = steps_engine(dir, 32);
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 3);
  for (const Idefics3Case& c : read_cases(GetParam(), "chats")) {
    GenerateOptions g;
    g.prompt = c.text;
    g.add_bos = false;
    for (int i : c.images) g.images.push_back(images.at(static_cast<size_t>(i)));
    g.max_tokens = static_cast<int>(c.greedy.size());
    g.sampling.temperature = 0.0f;
    g.ignore_eos = true;
    auto done = engine->generate(g);
    ASSERT_TRUE(done.has_value()) << done.status().to_string();
    EXPECT_EQ(done->prompt_tokens, static_cast<int>(c.prompt.size())) << c.text;
    EXPECT_EQ(done->token_ids, c.greedy) << c.text;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVisionTiles, ::testing::Values("idefics3", "smolvlm", "aya_vision"));

// An image sent as its tiles already (each [3, 32, 32] with an 8 x 8 grid) is the same prompt.
TEST(EngineVisionIdefics3Tiles, TilesSentOneByOneAreTheSamePrompt) {
  const std::string dir = kFixtures + "idefics3";
  auto engine = create_engine(testing::test_engine_options(dir, 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 3);
  const auto cases = read_cases("idefics3", "cases");
  ASSERT_EQ(cases.size(), 2u);
  ASSERT_EQ(images.size(), 3u);
  const Idefics3Case c = cases[1];  // image 1 alone: 3 x 3 tiles and the global one
  ASSERT_EQ(c.images, std::vector<int>{1});
  GenerateOptions r = testing::greedy_image_request(images, c.prompt, {}, c.greedy);
  const size_t tile = 3 * 32 * 32;
  for (size_t t = 0; t * tile < images[1].pixels->size(); ++t)
    r.images.push_back({std::make_shared<const std::vector<float>>(images[1].pixels->begin() + static_cast<std::ptrdiff_t>(t * tile),
                                                                   images[1].pixels->begin() + static_cast<std::ptrdiff_t>((t + 1) * tile)),
                        kSide, kSide});
  ASSERT_EQ(r.images.size(), 10u);
  testing::expect_greedy_run(*engine, r, c.greedy);
}

// A grid that is not whole tiles, pixels that are not the grid's tiles, or an image without its
// marker is refused naming the problem; the engine keeps serving.
TEST(EngineVisionIdefics3Tiles, BadImageRequestsAreRefusedNamingTheProblem) {
  const std::string dir = kFixtures + "idefics3";
  auto engine = create_engine(testing::test_engine_options(dir, 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 3);
  const Idefics3Case c = read_cases("idefics3", "cases").at(1);
  GenerateOptions r = testing::greedy_image_request(images, c.prompt, c.images, c.greedy);
  GenerateOptions bad_grid = r;
  bad_grid.images[0].grid_h = 12;
  testing::expect_refused(*engine, bad_grid, "image 0 has a grid of 12 x 24 patches");
  GenerateOptions bad_pixels = r;
  bad_pixels.images[0] = images[0];  // 2 x 3 tiles' pixels under 3 x 3 tiles' grid
  bad_pixels.images[0].grid_h = bad_pixels.images[0].grid_w = 3 * kSide;
  testing::expect_refused(*engine, bad_pixels, "image 0 of 3 x 3 tiles must be [10, 3, 32, 32] pixels");
  GenerateOptions no_marker;
  no_marker.prompt = "User: no image here";
  no_marker.images = {images[0]};
  no_marker.max_tokens = 1;
  testing::expect_refused(*engine, no_marker, "image marker");
  GenerateOptions too_few = r;  // the prompt's 10 runs of image tokens, 7 tiles
  too_few.images = {images[0]};
  testing::expect_refused(*engine, too_few, "image(s)");
  testing::expect_greedy_run(*engine, r, c.greedy);
}

// Aya Vision: a grid that is not a column of tiles, or pixels that are not its tiles, is refused
// naming the layout; the engine keeps serving.
TEST(EngineVisionAyaTiles, BadImageRequestsAreRefusedNamingTheProblem) {
  const std::string dir = kFixtures + "aya_vision";
  auto engine = create_engine(testing::test_engine_options(dir, 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 3);
  ASSERT_EQ(images.size(), 3u);
  const auto cases = read_cases("aya_vision", "cases");
  ASSERT_EQ(cases.size(), 2u);
  const Idefics3Case& c = cases[1];  // image 1 alone: one tile
  GenerateOptions r = testing::greedy_image_request(images, c.prompt, c.images, c.greedy);
  GenerateOptions side_by_side = r;
  side_by_side.images[0] = images[0];  // three tiles laid side by side
  side_by_side.images[0].grid_h = kSide, side_by_side.images[0].grid_w = 3 * kSide;
  testing::expect_refused(*engine, side_by_side, "image 0 has a grid of 8 x 24 patches; this model's images are columns");
  GenerateOptions short_pixels = r;
  short_pixels.images[0].grid_h = 2 * kSide;  // two tiles' grid, one tile's pixels
  testing::expect_refused(*engine, short_pixels, "image 0 of 2 tiles must be [2, 3, 32, 32] pixels");
  testing::expect_greedy_run(*engine, r, c.greedy);
}

}  // namespace
}  // namespace brigade
