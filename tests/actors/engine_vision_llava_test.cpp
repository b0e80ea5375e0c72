// LLaVA's images through the engine (tests/fixtures/llava, llava_full, llava_siglip, written by
// scripts/make_llava_fixtures.py: tiny LlavaForConditionalGeneration checkpoints and
// transformers' greedy tokens): Engine::load_image runs CLIPImageProcessor on the PNGs (one
// fixed-size grid), the scheduler finds each run of image tokens (the grid's, the class row's
// under "full", one patch fewer for SigLIP under "default"; no M-RoPE shift), cuts images over
// chunks anywhere, and a prefix-cache match may end inside one. LLaVA-NeXT (tests/fixtures/llava_next,
// scripts/make_llava_next_fixtures.py): load_image runs LlavaNextImageProcessor (the image's size as
// its grid, its base tile and tiles as its pixels), the scheduler and the tokenizer count each
// image's tokens from its size as LlavaNextProcessor does. LLaVA-OneVision
// (tests/fixtures/llava_onevision, scripts/make_llava_onevision_fixtures.py): the same for a lone
// image, with anyres_max_9's resize in the count; an image loaded for a prompt of several is its
// base tile alone (grid 0 x 0, 50 tokens).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <fstream>
#include <iterator>
#include <memory>
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
constexpr int32_t kImage = 3;

struct LlavaCase {
  std::vector<int32_t> prompt;
  std::vector<int> images;  // fixture images, in the prompt's order
  std::vector<int32_t> greedy;
};

// expected.json's `cases` and `chats` (the chat template's prompts).
std::vector<LlavaCase> read_cases(const std::string& fixture) {
  std::ifstream in(kFixtures + fixture + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<LlavaCase> out;
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                   c.at("greedy").get<std::vector<int32_t>>()});
  for (const auto& c : j.at("chats")) {
    LlavaCase lc{c.at("prompt").get<std::vector<int32_t>>(), {}, c.at("greedy").get<std::vector<int32_t>>()};
    for (const auto& part : c.at("parts"))
      if (part.is_number()) lc.images.push_back(part.get<int>());
    out.push_back(std::move(lc));
  }
  return out;
}

std::vector<ImagePixels> load_images(Engine& engine) { return testing::load_fixture_images(engine, kFixtures + "llava", 3); }

GenerateOptions request(const std::vector<ImagePixels>& images, const LlavaCase& c) {
  return testing::greedy_image_request(images, c.prompt, c.images, c.greedy);
}

// The engine a cases run uses: whole prompts (step_tokens 0), else chunked steps of step_tokens.
auto steps_engine(const std::string& dir, int step_tokens) {
  EngineOptions o = step_tokens > 0 ? testing::chunked_engine_options(dir) : testing::test_engine_options(dir, 2);
  if (step_tokens > 0) o.topology.instances.front().scheduler.max_step_tokens = step_tokens;
  return create_engine(o);
}

class EngineVisionLlava : public ::testing::TestWithParam<std::string> {};

// Whole prompts, steps of 32 and of 7 tokens (the images cut anywhere): the PNGs load as the
// tower's 7 x 7 grid, and every prompt continues as transformers' does.
TEST_P(EngineVisionLlava, PromptsWithImagesContinueAsTransformers) {
  const std::string dir = kFixtures + GetParam();
  const auto cases = read_cases(GetParam());
  for (int step_tokens : {0, 32, 7}) {
    auto engine = steps_engine(dir, step_tokens);
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(engine->model().takes_images());
    const std::vector<ImagePixels> images = load_images(*engine);
    ASSERT_EQ(images.size(), 3u);
    for (const ImagePixels& im : images) {
      EXPECT_EQ(im.grid_h, 7);
      EXPECT_EQ(im.grid_w, 7);
    }
    for (const LlavaCase& c : cases)
      testing::expect_greedy_run(*engine, request(images, c), c.greedy, "steps of " + std::to_string(step_tokens) + ", ");
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVisionLlava, ::testing::Values("llava", "llava_full", "llava_siglip"));

// A prefix-cache match ending inside an image: a text request evicts the image's tail pages, and
// the same request again starts its chunk inside the image (its features computed again).
TEST(EngineVisionLlavaCache, APrefixMatchEndingInsideAnImageContinuesIt) {
  const auto cases = read_cases("llava");
  EngineOptions o = testing::small_cache_options(kFixtures + "llava");
  o.topology.instances.front().kv.pages = 20;  // 80 tokens: the 59 of the request, then the text evicts its tail
  auto engine = create_engine(o);
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = load_images(*engine);
  const LlavaCase& c = cases[1];  // 2 text tokens, then image 0's 49 tokens at 2..50
  ASSERT_EQ(c.prompt.at(2), kImage);
  ASSERT_EQ(c.prompt.at(50), kImage);
  testing::expect_prefix_match_inside_image(*engine, request(images, c), c.greedy, 2, 51);
}

// The same prompt with another image shares only the pages before the image: its tokens change.
TEST(EngineVisionLlavaCache, ThePrefixCacheTellsImagesApart) {
  const auto cases = read_cases("llava");
  auto engine = create_engine(testing::test_engine_options(kFixtures + "llava", 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = load_images(*engine);
  const LlavaCase& c = cases[2];  // the first chat: "USER: " (6 tokens), then image 0
  ASSERT_EQ(c.prompt.at(6), kImage);
  testing::expect_greedy_run(*engine, request(images, c), c.greedy);
  GenerateOptions other = request(images, c);
  other.images[0] = images[2];  // transformers' greedy tokens differ for it
  auto done = engine->generate(other);
  ASSERT_TRUE(done.has_value()) << done.status().to_string();
  EXPECT_LE(done->cached_tokens, 6);
  EXPECT_NE(done->token_ids, c.greedy);
  testing::expect_greedy_run(*engine, request(images, c), c.greedy);
}

// Requests whose images do not fit are refused naming the problem.
TEST(EngineVisionLlavaCache, BadImageRequestsAreRefusedNamingTheProblem) {
  const auto cases = read_cases("llava");
  auto engine = create_engine(testing::test_engine_options(kFixtures + "llava", 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = load_images(*engine);
  const LlavaCase& c = cases[1];
  GenerateOptions short_run = request(images, c);
  short_run.prompt_ids.erase(short_run.prompt_ids.begin() + 2);
  testing::expect_refused(*engine, short_run, "image 0 is exactly 49 image tokens");
  GenerateOptions grid = request(images, c);
  grid.images[0] = ImagePixels{std::make_shared<const std::vector<float>>(size_t{3} * 24 * 24, 0.0f), 6, 6};
  testing::expect_refused(*engine, grid, "this model's vision tower takes 7 x 7");
  GenerateOptions none = request(images, c);
  none.images.clear();
  testing::expect_refused(*engine, none, "but the request 0");
  EngineOptions o = testing::test_engine_options(kFixtures + "llava", 1);
  o.image_max_pixels = 4096;
  auto refused = Engine::create(o);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("crop_size"), std::string::npos) << refused.status().message();
}


// ---- LLaVA-NeXT ----

// A fixture's chats: their text (the template's, `<image>` where each image goes) and their images.
struct LlavaChat {
  std::string text;
  std::vector<int> images;
  std::vector<int32_t> prompt, greedy;
};

std::vector<LlavaChat> read_chats(const std::string& fixture) {
  std::ifstream in(kFixtures + fixture + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<LlavaChat> out;
  for (const auto& c : j.at("chats")) {
    LlavaChat chat{c.at("text").get<std::string>(), {}, c.at("prompt").get<std::vector<int32_t>>(),
                       c.at("greedy").get<std::vector<int32_t>>()};
    for (const auto& part : c.at("parts"))
      if (part.is_number()) chat.images.push_back(part.get<int>());
    out.push_back(std::move(chat));
  }
  return out;
}

// The chat's text with its images (fixture images, by the chat's indices) runs greedily to
// transformers' tokens, its prompt as long as the processor's.
void expect_chat_continues(Engine& engine, const LlavaChat& chat, const std::vector<ImagePixels>& images) {
  GenerateOptions g;
  g.prompt = chat.text;
  g.add_bos = false;
  for (int i : chat.images) g.images.push_back(images.at(static_cast<size_t>(i)));
  g.max_tokens = static_cast<int>(chat.greedy.size());
  g.sampling.temperature = 0.0f;
  g.ignore_eos = true;
  auto done = engine.generate(g);
  ASSERT_TRUE(done.has_value()) << done.status().to_string();
  EXPECT_EQ(done->prompt_tokens, static_cast<int>(chat.prompt.size()));
  EXPECT_EQ(done->token_ids, chat.greedy) << chat.text;
}

// Whole prompts and steps of 32 and 7 tokens: the PNGs load with their sizes as grids, and every
// prompt (runs of 112 to 199 image tokens, newline rows included) continues as transformers'.
TEST(EngineVisionLlavaNext, PromptsWithImagesContinueAsTransformers) {
  const std::string dir = kFixtures + "llava_next";
  const auto cases = read_cases("llava_next");
  const std::vector<std::array<int, 2>> sizes = {{40, 60}, {28, 28}, {61, 33}, {90, 25}, {20, 100}};
  for (int step_tokens : {0, 32, 7}) {
    auto engine = steps_engine(dir, step_tokens);
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(engine->model().takes_images());
    const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 5);
    ASSERT_EQ(images.size(), 5u);
    for (size_t k = 0; k < images.size(); ++k) {
      EXPECT_EQ(images[k].grid_h, sizes[k][0]);
      EXPECT_EQ(images[k].grid_w, sizes[k][1]);
    }
    for (const LlavaCase& c : cases)
      testing::expect_greedy_run(*engine, request(images, c), c.greedy, "steps of " + std::to_string(step_tokens) + ", ");
  }
}

// The chats' text through the tokenizer: each `<image>` becomes as many image tokens as its
// image's size gives (LlavaNextProcessor's count), the same ids transformers' processor made.
TEST(EngineVisionLlavaNext, ChatTextExpandsEachImageByItsSize) {
  const std::string dir = kFixtures + "llava_next";
  auto engine = create_engine(testing::test_engine_options(dir, 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 5);
  for (const LlavaChat& chat : read_chats("llava_next")) expect_chat_continues(*engine, chat, images);
}

// An image whose pixels are not its size's tiles, or a run of another length, is refused naming
// the problem; the engine keeps serving.
TEST(EngineVisionLlavaNext, BadImageRequestsAreRefusedNamingTheProblem) {
  const std::string dir = kFixtures + "llava_next";
  const auto cases = read_cases("llava_next");
  auto engine = create_engine(testing::test_engine_options(dir, 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 5);
  const LlavaCase& c = cases[1];  // 2 text tokens, then image 0's 199 tokens
  GenerateOptions short_run = request(images, c);
  short_run.prompt_ids.erase(short_run.prompt_ids.begin() + 2);
  testing::expect_refused(*engine, short_run, "image 0 is exactly 199 image tokens");
  GenerateOptions resized = request(images, c);
  resized.images[0].grid_h = 28, resized.images[0].grid_w = 28;  // 5 tiles' pixels for a size of 3
  testing::expect_refused(*engine, resized, "base tile and 2 tiles");
  GenerateOptions zero = request(images, c);
  zero.images[0].grid_h = 0;
  testing::expect_refused(*engine, zero, "height x width in pixels");
  testing::expect_greedy_run(*engine, request(images, c), c.greedy);
}

// ---- LLaVA-OneVision ----

constexpr int kOnevisionImages = 6;

// The fixture's images for its cases (and its chats'): k < 6 image k alone, 6 + k image k as one
// of several (base only), as load_image makes them.
std::vector<ImagePixels> load_onevision_images(Engine& engine) {
  const std::string dir = kFixtures + "llava_onevision";
  std::vector<ImagePixels> out = testing::load_fixture_images(engine, dir, kOnevisionImages);
  const std::vector<ImagePixels> several = testing::load_fixture_images(engine, dir, kOnevisionImages, 2);
  out.insert(out.end(), several.begin(), several.end());
  return out;
}

// expected.json's cases, then its chats with their images numbered as load_onevision_images does.
std::vector<LlavaCase> read_onevision_cases() {
  std::vector<LlavaCase> out = read_cases("llava_onevision");
  std::ifstream in(kFixtures + "llava_onevision/expected.json");
  const size_t n_cases = nlohmann::json::parse(in).at("cases").size();
  for (size_t i = n_cases; i < out.size(); ++i)
    if (out[i].images.size() > 1)
      for (int& k : out[i].images) k += kOnevisionImages;
  return out;
}

// Whole prompts and steps of 32 and 7 tokens: a lone image loads with its size as its grid (and
// its tiles), an image for a prompt of several as its base tile (grid 0 x 0), and every prompt
// (runs of 89 to 499 image tokens, resized grids included, or 50 per image of several)
// continues as transformers'.
TEST(EngineVisionLlavaOnevision, PromptsWithImagesContinueAsTransformers) {
  const std::string dir = kFixtures + "llava_onevision";
  const auto cases = read_onevision_cases();
  for (int step_tokens : {0, 32, 7}) {
    auto engine = steps_engine(dir, step_tokens);
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(engine->model().takes_images());
    const std::vector<ImagePixels> images = load_onevision_images(*engine);
    ASSERT_EQ(images.size(), 2u * kOnevisionImages);
    EXPECT_EQ(images[2].grid_h, 150);
    EXPECT_EQ(images[2].grid_w, 170);
    EXPECT_EQ(images[2].pixels->size(), 31u * 3 * 30 * 30);  // the base tile and 5 x 6 tiles
    EXPECT_EQ(images[kOnevisionImages + 2].grid_h, 0);
    EXPECT_EQ(images[kOnevisionImages + 2].pixels->size(), 3u * 30 * 30);
    for (const LlavaCase& c : cases)
      testing::expect_greedy_run(*engine, request(images, c), c.greedy, "steps of " + std::to_string(step_tokens) + ", ");
  }
}

// The chats' text through the tokenizer: a lone `<image>` becomes as many image tokens as its
// image's size and anyres_max_9 give, each of two 50, the ids transformers' processor made.
TEST(EngineVisionLlavaOnevision, ChatTextExpandsEachImageAsTheProcessorDoes) {
  const std::string dir = kFixtures + "llava_onevision";
  auto engine = create_engine(testing::test_engine_options(dir, 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<LlavaChat> chats = read_chats("llava_onevision");
  ASSERT_EQ(chats.size(), 2u);
  for (const LlavaChat& chat : chats)  // the images as load_image makes them for a prompt of the chat's
    expect_chat_continues(*engine, chat,
                          testing::load_fixture_images(*engine, dir, kOnevisionImages, static_cast<int>(chat.images.size())));
}

// A base-only grid (0 x 0) with a lone image's tiles, or a negative size, is refused naming the
// problem; the engine keeps serving.
TEST(EngineVisionLlavaOnevision, BadImageRequestsAreRefusedNamingTheProblem) {
  const std::string dir = kFixtures + "llava_onevision";
  const auto cases = read_onevision_cases();
  auto engine = create_engine(testing::test_engine_options(dir, 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = load_onevision_images(*engine);
  const LlavaCase& c = cases[1];  // 2 text tokens, then image 0 alone
  ASSERT_EQ(c.images, std::vector<int>{0});
  GenerateOptions tiled_as_base = request(images, c);
  tiled_as_base.images[0].grid_h = tiled_as_base.images[0].grid_w = 0;
  testing::expect_refused(*engine, tiled_as_base, "image 0 of 0 x 0 pixels must be its base tile and 0 tiles");
  GenerateOptions negative = request(images, c);
  negative.images[0].grid_h = -3;
  testing::expect_refused(*engine, negative, "or 0 x 0 for an image that is its base tile alone");
  auto none = engine->load_image(std::vector<uint8_t>{1, 2, 3}, 0);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("holds none"), std::string::npos) << none.status().message();
  testing::expect_greedy_run(*engine, request(images, c), c.greedy);
}

}  // namespace
}  // namespace brigade
