// LLaVA-NeXT (LlavaNextForConditionalGeneration: VisionKind::llava with VisionConfig::anyres)
// against transformers (tests/fixtures/llava_next, written by scripts/make_llava_next_fixtures.py):
// LlavaNextProcessor's token counts for images of many sizes (the fixture's 28-pixel tiles and
// llava-v1.6's 336-pixel ones); the PNGs through LlavaNextImageProcessorPil's steps (pixel_values
// bit for bit); each image's features (get_image_features' pooler_output: the base tile, the
// unpadded tiles' grid, image_newline after each row) alone and several in one call, and
// mutations the comparison must catch (the newline dropped, the tiles' grid not unpadded); the
// config's pinpoints and what is refused; then the language model with images: every position's
// logits and the greedy tokens, whole and in chunks that cut the images anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hf_fixture.h"
#include "image_prompts.h"
#include "model_test_util.h"
#include "tests/vision_fixture.h"
#include "models/anyres.h"
#include "models/clip_vision.h"
#include "models/gemma_config.h"
#include "models/llava_config.h"
#include "models/llava_next_image_processor.h"
#include "models/mapped_file.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::fixture_json;
using testing::relative_error;

constexpr int kTextHidden = 48;
constexpr int kTextVocab = 261;
constexpr int32_t kImage = 3;
constexpr int kTile = 28;
constexpr float kTol = 1e-5f;       // features, relative to their largest: fp32 both sides
constexpr float kLogitTol = 5e-4f;  // logits through the tower, projector and language model

// The processor's pixel_values (pixel_values.f32) as StepImages whose grid is the image's size.
std::vector<StepImage> read_pixels() {
  const nlohmann::json j = fixture_json("llava_next", "expected.json");
  const std::string raw = read_text_file(fixture_dir("llava_next") + "/pixel_values.f32").value();
  const size_t tile = 3 * kTile * kTile;
  std::vector<StepImage> out;
  size_t at = 0;
  for (const auto& im : j.at("images")) {
    const int n = im.at("n_tiles").get<int>();
    const auto hw = im.at("source_hw").get<std::vector<int>>();
    auto px = std::make_shared<std::vector<float>>(tile * static_cast<size_t>(n));
    EXPECT_LE((at + px->size()) * sizeof(float), raw.size());
    std::memcpy(px->data(), raw.data() + at * sizeof(float), px->size() * sizeof(float));
    at += px->size();
    out.push_back({0, std::move(px), hw.at(0), hw.at(1)});
  }
  EXPECT_EQ(at * sizeof(float), raw.size());
  return out;
}

VisionConfig fixture_vision() {
  auto v = read_llava_vision(fixture_json("llava_next", "config.json"), kTextVocab);
  EXPECT_TRUE(v.has_value()) << v.status().to_string();
  return v.has_value() ? *v : VisionConfig{};
}

using Tower = testing::LoadedTower<ClipVision>;

std::unique_ptr<Tower> load_tower(const std::function<void(VisionConfig&)>& mutate = {}) {
  return testing::load_fixture_tower<ClipVision>(
      fixture_dir("llava_next"), read_llava_vision(fixture_json("llava_next", "config.json"), kTextVocab), kTextHidden,
      [](Tower&, std::map<std::string, RawTensor> m) { return gemma3_tensors(std::move(m)); }, mutate);
}

// ---- The layout ----

// LlavaNextProcessor's counts: best pinpoint, unpadding and newlines, for sizes that pick each
// pinpoint, cut rows or columns, and the extremes (1 x 500, 2000 x 2000 at llava-v1.6's 336).
TEST(LlavaNextLayout, TokenCountsAreLlavaNextProcessors) {
  const nlohmann::json j = fixture_json("llava_next", "expected.json");
  const VisionConfig v = fixture_vision();
  ASSERT_TRUE(v.anyres.on());
  for (const auto& row : j.at("layouts").at("fixture")) {
    const int h = row.at(0), w = row.at(1), n = row.at(2);
    EXPECT_EQ(v.image_tokens(h, w), n) << h << " x " << w;
    EXPECT_EQ(v.image_features(h, w), n);
    EXPECT_LE(n, anyres_max_tokens(v.anyres));
  }
  // llava-v1.6 (LlavaNextConfig's defaults: CLIP-L/14 at 336 pixels, its five pinpoints).
  nlohmann::json real = {{"architectures", {"LlavaNextForConditionalGeneration"}}, {"model_type", "llava_next"}};
  auto rv = read_llava_vision(real, 32064);
  ASSERT_TRUE(rv.has_value()) << rv.status().to_string();
  ASSERT_EQ(rv->anyres.pinpoints.size(), 5u);
  EXPECT_EQ(rv->anyres.side, 24);
  for (const auto& row : j.at("layouts").at("llava_v1_6")) {
    const int h = row.at(0), w = row.at(1), n = row.at(2);
    EXPECT_EQ(rv->image_tokens(h, w), n) << h << " x " << w;
  }
  EXPECT_EQ(anyres_max_tokens(rv->anyres), 576 + 48 * 49);  // 672 x 672: a 48 x 48 grid and its newlines
  EXPECT_EQ(anyres_max_tiles(rv->anyres), 5);
  const AnyresLayout l = anyres_layout(rv->anyres, 480, 640);  // 672 x 672, 4 tiles, rows cut
  EXPECT_EQ(l.tiles(), 4);
  EXPECT_EQ(l.cols, 48);
  EXPECT_EQ(l.rows, 36);
  EXPECT_EQ(l.row0, 6);
}

TEST(LlavaNextLayout, SelectBestResolutionIsTransformers) {
  const std::vector<std::array<int, 2>> pins = {{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}};
  EXPECT_EQ(select_best_resolution(480, 640, pins), (std::array<int, 2>{672, 672}));
  EXPECT_EQ(select_best_resolution(336, 336, pins), (std::array<int, 2>{336, 672}));  // the first of the least waste
  EXPECT_EQ(select_best_resolution(100, 1000, pins), (std::array<int, 2>{336, 1008}));
  EXPECT_EQ(select_best_resolution(1000, 100, pins), (std::array<int, 2>{1008, 336}));
}

// ---- The config ----

TEST(LlavaNextConfig, ReadsTheFixtureAndRefusesByName) {
  const VisionConfig v = fixture_vision();
  EXPECT_EQ(v.kind, VisionKind::llava);
  EXPECT_EQ(v.anyres.tile, 28);
  EXPECT_EQ(v.anyres.side, 7);
  EXPECT_EQ(v.anyres.pinpoints, (std::vector<std::array<int, 2>>{{28, 56}, {56, 28}, {56, 56}, {84, 28}, {28, 84}}));
  auto c = parse_hf_config(fixture_json("llava_next", "config.json").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_TRUE(c->multimodal_text);
  EXPECT_TRUE(c->vision.anyres.on());
  // LLaVA 1.5 stays without tiles.
  auto plain = read_llava_vision(fixture_json("llava", "config.json"), kTextVocab);
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->anyres.on());
  testing::expect_refused_by_name(fixture_json("llava_next", "config.json"), {
      {[](nlohmann::json& j) { j["image_grid_pinpoints"] = {{28, 50}}; }, "image_grid_pinpoints [28, 50]"},
      {[](nlohmann::json& j) { j["image_grid_pinpoints"] = {{28 * 9, 28 * 8}}; }, "at most 64 whole tiles"},
      {[](nlohmann::json& j) { j["image_grid_pinpoints"] = {{28}}; }, "image_grid_pinpoints holds [28]"},
      {[](nlohmann::json& j) { j["image_grid_pinpoints"] = nlohmann::json::array(); }, "non-empty list"},
      {[](nlohmann::json& j) { j["vision_feature_select_strategy"] = "full"; }, "vision_feature_select_strategy 'full'"},
  }, [](const nlohmann::json& j) { return read_llava_vision(j, kTextVocab); });
}

// ---- The processor ----

// The PNGs through LlavaNextImageProcessor (bicubic into the best pinpoint, zero padding, 28-pixel
// tiles after the squashed base tile) give transformers' pixel_values, and the image's size as
// its grid.
TEST(LlavaNextImageProcessor, PngsGiveTransformersPixelValues) {
  const VisionConfig v = fixture_vision();
  auto config = model_llava_next_image_processor(fixture_dir("llava_next"), v.anyres);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  const auto want = read_pixels();
  ASSERT_EQ(want.size(), 5u);
  for (size_t k = 0; k < want.size(); ++k) {
    auto bytes = read_text_file(fixture_dir("llava_next") + "/image" + std::to_string(k) + ".png");
    ASSERT_TRUE(bytes.has_value());
    auto px = llava_next_image_pixels(std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), *config);
    ASSERT_TRUE(px.has_value()) << px.status().to_string();
    EXPECT_EQ(px->grid_h, want[k].grid_h);
    EXPECT_EQ(px->grid_w, want[k].grid_w);
    ASSERT_EQ(px->pixels.size(), want[k].pixels->size()) << "image " << k;
    float worst = 0.0f;
    for (size_t i = 0; i < px->pixels.size(); ++i) worst = std::max(worst, std::fabs(px->pixels[i] - (*want[k].pixels)[i]));
    EXPECT_LE(worst, 1e-6f) << "image " << k;
  }
}

TEST(LlavaNextImageProcessor, RefusesWhatDisagreesWithTheTower) {
  const nlohmann::json base = fixture_json("llava_next", "preprocessor_config.json");
  auto ok = parse_llava_next_image_processor_config(base, kTile);
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_EQ(ok->grid.pinpoints.size(), 5u);
  EXPECT_EQ(ok->steps.resample, Resample::bicubic);
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> bad = {
      {[](nlohmann::json& j) { j["image_processor_type"] = "CLIPImageProcessor"; }, "'CLIPImageProcessor' is not LLaVA-NeXT / LLaVA-OneVision's"},
      {[](nlohmann::json& j) { j["crop_size"] = {{"height", 24}, {"width", 24}}; }, "24x24"},
      {[](nlohmann::json& j) { j["size"] = {{"shortest_edge", 30}}; }, "shortest edge of 30"},
      {[](nlohmann::json& j) { j["image_grid_pinpoints"] = {{28, 30}}; }, "[28, 30] is not whole tiles"},
      {[](nlohmann::json& j) { j["image_grid_pinpoints"] = 5; }, "non-empty list"},
      {[](nlohmann::json& j) { j["do_pad"] = "yes"; }, "do_pad"},
  };
  for (const auto& [edit, needle] : bad) {
    nlohmann::json j = base;
    edit(j);
    auto c = parse_llava_next_image_processor_config(j, kTile);
    ASSERT_FALSE(c.has_value()) << needle;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  }
  // Pinpoints other than config.json's are refused at load: the model lays the tiles out by its own.
  const testing::TempDir dir("llava_next_proc");
  nlohmann::json j = base;
  j["image_grid_pinpoints"] = {{28, 56}};
  std::ofstream(dir.file("preprocessor_config.json")) << j.dump();
  auto c = model_llava_next_image_processor(dir.str(), fixture_vision().anyres);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.status().message().find("not config.json's"), std::string::npos) << c.status().message();
}

// ---- The tower ----

TEST(LlavaNextVision, FeaturesMatchTransformersAloneAndTogether) {
  const auto pixels = read_pixels();
  const auto want = testing::read_image_features(fixture_json("llava_next", "expected.json"));
  auto t = load_tower();
  ASSERT_NE(t, nullptr);
  for (size_t k = 0; k < pixels.size(); ++k)
    EXPECT_EQ(static_cast<size_t>(t->v.image_features(pixels[k].grid_h, pixels[k].grid_w)) * kTextHidden, want[k].size());
  const float worst = testing::expect_features_alone_and_together(*t, pixels, want, {2, 0, 4, 1, 3}, kTol);
  std::printf("[ measured ] llava_next: largest relative feature difference from transformers: %.3g\n", worst);
}

// Without the unpadding (the whole tiles' grid) or with the newline's weights zeroed the features
// move: the layout and image_newline are what the comparison checks.
TEST(LlavaNextVision, NewlineAndUnpaddingAreChecked) {
  const auto pixels = read_pixels();
  const auto want = testing::read_image_features(fixture_json("llava_next", "expected.json"));
  auto zeroed = testing::load_fixture_tower<ClipVision>(
      fixture_dir("llava_next"), read_llava_vision(fixture_json("llava_next", "config.json"), kTextVocab), kTextHidden,
      [](Tower& t, std::map<std::string, RawTensor> m) {
        auto out = gemma3_tensors(std::move(m));
        testing::zero_tensor(t, out.at("image_newline"));
        return out;
      });
  ASSERT_NE(zeroed, nullptr);
  EXPECT_GT(relative_error(testing::encode_images(*zeroed, {pixels[0]}).at(0), want[0]), 100 * kTol);
  // Image 1 (28 x 28 in 1 x 2 tiles) keeps 8 of its 14 feature columns: as a 56-pixel-wide image
  // it would keep them all and have 49 + 7 * 15 tokens instead of 49 + 7 * 9.
  const VisionConfig v = fixture_vision();
  EXPECT_EQ(v.image_tokens(28, 28), 49 + 7 * 9);
  EXPECT_EQ(v.image_tokens(28, 56), 49 + 7 * 15);
}

TEST(LlavaNextVision, BadImagesAreRefusedBeforeRunning) {
  auto t = load_tower();
  ASSERT_NE(t, nullptr);
  const auto pixels = read_pixels();
  StepImage im = pixels[0];
  im.grid_h = 28, im.grid_w = 28;  // 40 x 60 pixels' 5 tiles under a size that takes 3
  auto buf = t->backend->allocate(static_cast<size_t>(t->v.image_features(28, 28)) * kTextHidden * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  Status st = t->tower.encode({&im, 1}, buf->view(DType::f32, {t->v.image_features(28, 28), kTextHidden}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("base tile and 2 tiles"), std::string::npos) << st.message();
  im.grid_h = 0;
  EXPECT_FALSE(t->tower.encode({&im, 1}, buf->view(DType::f32, {t->v.image_features(28, 28), kTextHidden})).is_ok());
}

// ---- The language model with images ----

class LlavaNextModel : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<StepImage> pixels = read_pixels();
    ASSERT_EQ(pixels.size(), 5u);
    prompts_.load({.fixture = "llava_next", .kind = VisionKind::llava, .markers = {.image = kImage},
                   .max_batch_tokens = 512, .pages = 32},
                  std::move(pixels));
    ASSERT_TRUE(prompts_.loaded());
  }
  testing::ImagePrompts prompts_;
};

TEST_F(LlavaNextModel, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const float worst = prompts_.expect_prompts_match(kLogitTol);
  std::printf("[ measured ] llava_next: largest |logit difference| from transformers: %.3g\n", worst);
}

// Chunks of 29 and 64 rows cut the images (and their newline rows) anywhere.
TEST_F(LlavaNextModel, ChunksCuttingImagesGiveTheSameLogits) { prompts_.expect_chunks_match(kLogitTol, {29, 64}); }

}  // namespace
}  // namespace brigade
