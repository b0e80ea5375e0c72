// Mistral 3's images through the engine (tests/fixtures/mistral3_vision, written by
// scripts/make_pixtral_fixtures.py: a tiny Mistral3ForConditionalGeneration and transformers'
// greedy tokens): Engine::load_image runs PixtralImageProcessor on the PNGs, the scheduler finds
// each image's rows of [IMG] with their [IMG_BREAK]s and [IMG_END] (no M-RoPE shift), cuts images
// over chunks anywhere, and a prefix-cache match may end inside one. A tower refused by field
// leaves the language model serving text.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
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

const std::string kFixture = std::string(BRIGADE_FIXTURES) + "/mistral3_vision";
constexpr int32_t kImage = 10, kImageBreak = 12;

// A prompt of expected.json (`cases`, or `chats`: the real template's) and its images.
struct PixtralCase {
  std::vector<int32_t> prompt;
  std::vector<int> images;  // fixture images, in the prompt's order
  std::vector<int32_t> greedy;
};

struct Expected {
  std::vector<PixtralCase> cases;
  std::vector<std::vector<int>> image_sizes;  // [h, w] pixels after the processor's resize
  int patch = 0;
};

Expected read_expected() {
  std::ifstream in(kFixture + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  Expected e;
  e.patch = j.at("patch_size").get<int>();
  for (const auto& im : j.at("images")) e.image_sizes.push_back(im.at("image_sizes").get<std::vector<int>>());
  for (const auto& c : j.at("cases"))
    e.cases.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                       c.at("greedy").get<std::vector<int32_t>>()});
  for (const auto& c : j.at("chats")) {
    PixtralCase pc{c.at("prompt").get<std::vector<int32_t>>(), {}, c.at("greedy").get<std::vector<int32_t>>()};
    for (const auto& part : c.at("parts"))
      if (part.is_number()) pc.images.push_back(part.get<int>());
    e.cases.push_back(std::move(pc));
  }
  return e;
}

std::vector<uint8_t> png(int k) {
  std::ifstream in(kFixture + "/image" + std::to_string(k) + ".png", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The fixture's images as Engine::load_image makes them.
std::vector<ImagePixels> load_images(Engine& engine) {
  std::vector<ImagePixels> out;
  for (int k = 0; k < 3; ++k) {
    auto image = engine.load_image(png(k));
    EXPECT_TRUE(image.has_value()) << image.status().to_string();
    if (image) out.push_back(*image);
  }
  return out;
}

GenerateOptions request(const std::vector<ImagePixels>& images, const PixtralCase& c) {
  GenerateOptions r;
  r.prompt_ids = c.prompt;
  r.max_tokens = static_cast<int>(c.greedy.size());
  r.ignore_eos = true;  // transformers' generate ran without a stop
  r.sampling.temperature = 0.0f;
  for (int k : c.images) r.images.push_back(images.at(static_cast<size_t>(k)));
  return r;
}

// Runs c expecting transformers' greedy tokens; cached_tokens of the run (-1 when it failed).
int expect_greedy(Engine& engine, const std::vector<ImagePixels>& images, const PixtralCase& c,
                  const std::string& what = "") {
  return testing::expect_greedy_run(engine, request(images, c), c.greedy, what);
}

// Whole prompts, steps of 32 and of 7 tokens (the images cut inside rows and at breaks): the
// images load as the processor sizes them, and every prompt continues as transformers' does.
TEST(EngineVisionPixtral, PromptsWithImagesContinueAsTransformers) {
  const Expected e = read_expected();
  for (int step_tokens : {0, 32, 7}) {
    EngineOptions o = step_tokens > 0 ? testing::chunked_engine_options(kFixture) : testing::test_engine_options(kFixture, 2);
    if (step_tokens > 0) o.topology.instances.front().scheduler.max_step_tokens = step_tokens;
    auto engine = create_engine(o);
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->model().image_merge, 2);
    const std::vector<ImagePixels> images = load_images(*engine);
    ASSERT_EQ(images.size(), 3u);
    for (size_t k = 0; k < images.size(); ++k) {
      EXPECT_EQ(images[k].grid_h * e.patch, e.image_sizes[k][0]) << "image " << k;
      EXPECT_EQ(images[k].grid_w * e.patch, e.image_sizes[k][1]) << "image " << k;
    }
    for (const PixtralCase& c : e.cases) expect_greedy(*engine, images, c, "steps of " + std::to_string(step_tokens) + ", ");
  }
}

// A prefix-cache match ending inside an image: a text request evicts the image's tail pages, and
// the same request again starts its chunk inside the image (its features computed again).
TEST(EngineVisionPixtral, APrefixMatchEndingInsideAnImageContinuesIt) {
  const Expected e = read_expected();
  auto engine = create_engine(testing::small_cache_options(kFixture));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = load_images(*engine);
  const PixtralCase& c = e.cases[1];  // 2 text tokens, then image 0's 28 tokens at 2..29
  ASSERT_EQ(c.prompt.at(2), kImage);
  testing::expect_prefix_match_inside_image(*engine, request(images, c), c.greedy, 2, 30);
}

// Requests whose images do not fit their layout are refused naming the problem.
TEST(EngineVisionPixtral, BadImageRequestsAreRefusedNamingTheProblem) {
  const Expected e = read_expected();
  auto engine = create_engine(testing::test_engine_options(kFixture, 1));
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = load_images(*engine);
  auto refused = [&](const GenerateOptions& r, const std::string& why) { testing::expect_refused(*engine, r, why); };
  const PixtralCase& c = e.cases[1];  // image 0 (4 rows of 6 tokens) at 2
  GenerateOptions moved_break = request(images, c);
  ASSERT_EQ(moved_break.prompt_ids.at(2 + 6), kImageBreak);
  moved_break.prompt_ids[2 + 6] = kImage;
  refused(moved_break, "where its layout (rows of 6 image tokens 10, each then 12, the last 13) puts 12");
  GenerateOptions other = request(images, c);
  other.images[0] = images[2];  // 6 x 2 tokens: 18 with its breaks, not the prompt's 28
  refused(other, "image 0 is exactly 18 image tokens");
  GenerateOptions none = request(images, c);
  none.images.clear();
  refused(none, "1 image(s) of image tokens but the request 0");
  expect_greedy(*engine, images, c);
}

// Qwen2-VL's pixel bounds (--mm-processor-kwargs) are refused by name: the Pixtral processor fits
// images within its longest_edge.
TEST(EngineVisionPixtral, QwensPixelBoundsAreRefused) {
  EngineOptions o = testing::test_engine_options(kFixture, 1);
  o.image_max_pixels = 4096;
  auto engine = Engine::create(o);
  ASSERT_FALSE(engine.has_value());
  EXPECT_NE(engine.status().message().find("size.longest_edge"), std::string::npos) << engine.status().message();
}

// A tower brigade does not run (vision_config.hidden_act gelu) leaves the language model serving
// text; images are refused with the reason.
TEST(EngineVisionPixtral, ARefusedTowerServesTextAndSaysWhy) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "pixtral_gelu";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json"})
    fs::copy_file(fs::path(kFixture) / f, dir / f);
  std::ifstream in(fs::path(kFixture) / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["vision_config"]["hidden_act"] = "gelu";
  std::ofstream(dir / "config.json") << config.dump();
  auto engine = create_engine(testing::test_engine_options(dir.string(), 1));
  ASSERT_NE(engine, nullptr);
  EXPECT_FALSE(engine->model().takes_images());
  auto image = engine->load_image(png(0));
  ASSERT_FALSE(image.has_value());
  EXPECT_NE(image.status().message().find("vision_config.hidden_act 'gelu'"), std::string::npos) << image.status().message();
  GenerateOptions text;
  text.prompt_ids = {1, 3, 40, 41, 4};
  text.max_tokens = 2;
  text.ignore_eos = true;
  auto done = engine->generate(text);
  ASSERT_TRUE(done.has_value()) << done.status().to_string();
  EXPECT_EQ(done->token_ids.size(), 2u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace brigade
