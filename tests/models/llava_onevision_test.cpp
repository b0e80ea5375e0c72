// LLaVA-OneVision (LlavaOnevisionForConditionalGeneration: VisionKind::llava with
// VisionConfig::anyres and anyres.max_area) against transformers (tests/fixtures/llava_onevision,
// written by scripts/make_llava_onevision_fixtures.py): LlavaOnevisionProcessor's token counts for
// lone images of many sizes (the fixture's 28-pixel tiles and llava-onevision's 384-pixel ones,
// anyres_max_9's resize included) and for the images of a prompt with several (base only); the
// PNGs through LlavaOnevisionImageProcessorPil's steps, alone (tiles) and as one of several (padded
// square), pixel_values bit for bit; each image's features (get_image_features' pooler_output:
// the base tile, the unpadded tiles' grid resized bilinearly where anyres_max_9 says,
// image_newline after each row; a base-only image's tile and one newline) alone and several in
// one call; the config and what is refused; then the language model with images: every
// position's logits and the greedy tokens, whole and in chunks that cut the images anywhere.
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

constexpr const char* kFixture = "llava_onevision";
constexpr int kTextHidden = 48;
constexpr int kTextVocab = 261;
constexpr int32_t kImage = 3;
constexpr int kTile = 30;  // 7 x 7 patches of 4 pixels: the stride drops 2 a side
constexpr size_t kImages = 6;
constexpr float kTol = 1e-5f;       // features, relative to their largest: fp32 both sides
constexpr float kLogitTol = 5e-4f;  // logits through the tower, projector and language model

// One of the fixture's f32 files as StepImages of n_tiles tiles each (`tiles` per image) and the
// given grids.
std::vector<StepImage> read_tiles(const std::string& file, const std::vector<int>& tiles,
                                  const std::vector<std::array<int, 2>>& grids) {
  const std::string raw = read_text_file(fixture_dir(kFixture) + "/" + file).value();
  const size_t tile = 3 * kTile * kTile;
  std::vector<StepImage> out;
  size_t at = 0;
  for (size_t k = 0; k < tiles.size(); ++k) {
    auto px = std::make_shared<std::vector<float>>(tile * static_cast<size_t>(tiles[k]));
    EXPECT_LE((at + px->size()) * sizeof(float), raw.size());
    if ((at + px->size()) * sizeof(float) > raw.size()) return {};
    std::memcpy(px->data(), raw.data() + at * sizeof(float), px->size() * sizeof(float));
    at += px->size();
    out.push_back({0, std::move(px), grids[k][0], grids[k][1]});
  }
  EXPECT_EQ(at * sizeof(float), raw.size());
  return out;
}

// The images alone (pixel_values.f32: their tiles, the image's size as the grid).
std::vector<StepImage> read_alone() {
  const nlohmann::json j = fixture_json(kFixture, "expected.json");
  std::vector<int> tiles;
  std::vector<std::array<int, 2>> grids;
  for (const auto& im : j.at("images")) {
    tiles.push_back(im.at("n_tiles").get<int>());
    const auto hw = im.at("source_hw").get<std::vector<int>>();
    grids.push_back({hw.at(0), hw.at(1)});
  }
  return read_tiles("pixel_values.f32", tiles, grids);
}

// The images as ones of several (base_pixel_values.f32: one tile each, grid 0 x 0).
std::vector<StepImage> read_base() {
  return read_tiles("base_pixel_values.f32", std::vector<int>(kImages, 1),
                    std::vector<std::array<int, 2>>(kImages, {0, 0}));
}

std::vector<std::vector<float>> read_base_features(const nlohmann::json& expected) {
  std::vector<std::vector<float>> out;
  for (const auto& im : expected.at("images")) out.push_back(testing::flatten_floats(im.at("base_features")));
  return out;
}

VisionConfig fixture_vision() {
  auto v = read_llava_vision(fixture_json(kFixture, "config.json"), kTextVocab);
  EXPECT_TRUE(v.has_value()) << v.status().to_string();
  return v.has_value() ? *v : VisionConfig{};
}

using Tower = testing::LoadedTower<ClipVision>;

std::unique_ptr<Tower> load_tower() {
  return testing::load_fixture_tower<ClipVision>(
      fixture_dir(kFixture), read_llava_vision(fixture_json(kFixture, "config.json"), kTextVocab), kTextHidden,
      [](Tower&, std::map<std::string, RawTensor> m) { return gemma3_tensors(std::move(m)); });
}

// ---- The layout ----

// LlavaOnevisionProcessor's counts for lone images: best pinpoint, unpadding, anyres_max_9's
// resize and the newlines, for sizes that resize and sizes that do not, and the extremes.
TEST(LlavaOnevisionLayout, TokenCountsAreLlavaOnevisionProcessors) {
  const nlohmann::json j = fixture_json(kFixture, "expected.json");
  const VisionConfig v = fixture_vision();
  ASSERT_TRUE(v.anyres.onevision());
  const int most = anyres_max_tokens(v.anyres);
  for (const auto& row : j.at("layouts").at("fixture")) {
    const int h = row.at(0), w = row.at(1), n = row.at(2);
    EXPECT_EQ(v.image_tokens(h, w), n) << h << " x " << w;
    EXPECT_EQ(v.image_features(h, w), n);
    EXPECT_LE(n, most);
  }
  // The images the fixture marks as resized are the ones brigade resizes.
  for (const auto& im : j.at("images")) {
    const auto hw = im.at("source_hw").get<std::vector<int>>();
    EXPECT_EQ(anyres_layout(v.anyres, hw[0], hw[1]).resized(), im.at("resized").get<bool>()) << hw[0] << " x " << hw[1];
  }
  // An image of a prompt with several: its 49 features and one newline.
  EXPECT_EQ(v.image_tokens(0, 0), 50);
  EXPECT_EQ(anyres_layout(v.anyres, 0, 0).tiles(), 0);
  // llava-onevision (LlavaOnevisionConfig's defaults: SigLIP so400m/14 at 384 pixels, 36 pinpoints, anyres_max_9).
  nlohmann::json real = {{"architectures", {"LlavaOnevisionForConditionalGeneration"}}, {"model_type", "llava_onevision"}};
  auto rv = read_llava_vision(real, 152000);
  ASSERT_TRUE(rv.has_value()) << rv.status().to_string();
  EXPECT_EQ(rv->image_size, 384);
  EXPECT_EQ(rv->hidden_size, 1152);
  EXPECT_EQ(rv->n_layers, 26);
  EXPECT_FALSE(rv->class_token);
  EXPECT_EQ(rv->extra_tokens, 0);  // "full" on SigLIP
  EXPECT_EQ(rv->feature_layers, std::vector<int>{26});
  EXPECT_EQ(rv->image_token, 151646);
  ASSERT_EQ(rv->anyres.pinpoints.size(), 36u);
  EXPECT_EQ(rv->anyres.side, 27);
  EXPECT_EQ(rv->anyres.max_area, 9);
  for (const auto& row : j.at("layouts").at("onevision")) {
    const int h = row.at(0), w = row.at(1), n = row.at(2);
    EXPECT_EQ(rv->image_tokens(h, w), n) << h << " x " << w;
    EXPECT_LE(n, anyres_max_tokens(rv->anyres));
  }
  EXPECT_EQ(rv->image_tokens(0, 0), 729 + 1);
  EXPECT_EQ(anyres_max_tiles(rv->anyres), 37);
}

// torch's interpolate(mode="bilinear", align_corners=False) taps: the source index
// scale * (i + 0.5) - 0.5 clamped at 0, its floor and the next (the last repeated).
TEST(LlavaOnevisionLayout, BilinearTapsAreTorchs) {
  const std::vector<BilinearTap> down = bilinear_taps(42, 22);  // 6 tiles of 7 resized by anyres_max_9
  ASSERT_EQ(down.size(), 22u);
  const float scale = 42.0f / 22.0f;
  EXPECT_EQ(down[0].i0, 0);
  EXPECT_EQ(down[0].i1, 1);
  EXPECT_FLOAT_EQ(down[0].w1, scale * 0.5f - 0.5f);
  EXPECT_EQ(down[21].i0, 40);
  EXPECT_EQ(down[21].i1, 41);
  for (const BilinearTap& t : down) EXPECT_FLOAT_EQ(t.w0 + t.w1, 1.0f);
  const std::vector<BilinearTap> up = bilinear_taps(2, 4);  // the first output clamps to 0, the last to the end
  EXPECT_EQ(up[0].i0, 0);
  EXPECT_FLOAT_EQ(up[0].w1, 0.0f);
  EXPECT_EQ(up[3].i0, 1);
  EXPECT_EQ(up[3].i1, 1);
  const std::vector<BilinearTap> same = bilinear_taps(5, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(same[static_cast<size_t>(i)].i0, i);
}

// ---- The config ----

TEST(LlavaOnevisionConfig, ReadsTheFixtureAndRefusesByName) {
  const VisionConfig v = fixture_vision();
  EXPECT_EQ(v.kind, VisionKind::llava);
  EXPECT_EQ(v.anyres.tile, 30);
  EXPECT_EQ(v.anyres.side, 7);
  EXPECT_EQ(v.anyres.pinpoints.size(), 36u);
  EXPECT_EQ(v.anyres.max_area, 9);
  EXPECT_FALSE(v.class_token);
  auto c = parse_hf_config(fixture_json(kFixture, "config.json").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "qwen2");
  EXPECT_TRUE(c->multimodal_text);
  EXPECT_TRUE(c->vision.anyres.onevision());
  // LLaVA-NeXT keeps its grid as it is.
  auto next = read_llava_vision(fixture_json("llava_next", "config.json"), kTextVocab);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(next->anyres.on());
  EXPECT_FALSE(next->anyres.onevision());
  EXPECT_FALSE(check_anyres_size(next->anyres, 0, 0, "image 0").is_ok());  // no base-only images there
  testing::expect_refused_by_name(fixture_json(kFixture, "config.json"), {
      {[](nlohmann::json& j) { j["vision_aspect_ratio"] = "anyres"; }, "vision_aspect_ratio 'anyres'"},
      {[](nlohmann::json& j) { j["vision_aspect_ratio"] = "anyres_max_0"; }, "vision_aspect_ratio 'anyres_max_0'"},
      {[](nlohmann::json& j) { j["vision_aspect_ratio"] = "anyres_max_x"; }, "anyres_max_N for a positive N"},
      {[](nlohmann::json& j) {  // one row of 64 tiles under anyres_max_1 resizes to no rows
         j["vision_aspect_ratio"] = "anyres_max_1";
         j["image_grid_pinpoints"] = {{30, 30 * 64}};
       }, "resizes some image's features to no rows"},
      {[](nlohmann::json& j) { j["vision_feature_select_strategy"] = "default"; },
       "vision_feature_select_strategy 'default' with a SigLIP tower"},
  }, [](const nlohmann::json& j) { return read_llava_vision(j, kTextVocab); });
}

// ---- The processor ----

std::vector<uint8_t> png(size_t k) {
  auto bytes = read_text_file(fixture_dir(kFixture) + "/image" + std::to_string(k) + ".png");
  EXPECT_TRUE(bytes.has_value());
  return bytes ? std::vector<uint8_t>(bytes->begin(), bytes->end()) : std::vector<uint8_t>{};
}

float worst_pixel(const std::vector<float>& got, const std::vector<float>& want) {
  float worst = got.size() == want.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  return worst;
}

// The PNGs through LlavaOnevisionImageProcessor: alone, the tiles after the squashed base tile
// (the image's size as the grid); as one of several, the image padded square with its mean color
// and resized (grid 0 x 0). Both give transformers' pixel_values.
TEST(LlavaOnevisionImageProcessor, PngsGiveTransformersPixelValuesAloneAndAsOneOfSeveral) {
  const VisionConfig v = fixture_vision();
  auto config = model_llava_next_image_processor(fixture_dir(kFixture), v.anyres);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  EXPECT_TRUE(config->onevision);
  const auto alone = read_alone(), base = read_base();
  ASSERT_EQ(alone.size(), kImages);
  ASSERT_EQ(base.size(), kImages);
  for (size_t k = 0; k < kImages; ++k) {
    const std::vector<uint8_t> bytes = png(k);
    auto image = decode_image(bytes);
    ASSERT_TRUE(image.has_value()) << image.status().to_string();
    const PatchedImage tiles = preprocess_llava_next(*image, *config);
    EXPECT_EQ(tiles.grid_h, alone[k].grid_h);
    EXPECT_EQ(tiles.grid_w, alone[k].grid_w);
    EXPECT_LE(worst_pixel(tiles.pixels, *alone[k].pixels), 1e-6f) << "image " << k << " alone";
    const PatchedImage one = preprocess_llava_onevision_base(*image, *config);
    EXPECT_EQ(one.grid_h, 0);
    EXPECT_EQ(one.grid_w, 0);
    EXPECT_LE(worst_pixel(one.pixels, *base[k].pixels), 1e-6f) << "image " << k << " as one of several";
  }
}

TEST(LlavaOnevisionImageProcessor, RefusesWhatDisagreesWithTheModel) {
  const nlohmann::json base = fixture_json(kFixture, "preprocessor_config.json");
  auto ok = parse_llava_next_image_processor_config(base, kTile);
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_TRUE(ok->onevision);
  EXPECT_EQ(ok->grid.pinpoints.size(), 36u);
  EXPECT_FALSE(ok->steps.do_center_crop);
  // LlavaOnevisionImageProcessor's defaults: 384 x 384, its 36 pinpoints, no center crop.
  auto defaults = parse_llava_next_image_processor_config({{"image_processor_type", "LlavaOnevisionImageProcessor"}}, 384);
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_EQ(defaults->grid.pinpoints.size(), 36u);
  EXPECT_EQ(defaults->grid.pinpoints.back(), (std::array<int, 2>{2304, 2304}));
  EXPECT_FALSE(defaults->steps.do_center_crop);
  nlohmann::json no_resize = base;
  no_resize["do_resize"] = false;
  auto refused = parse_llava_next_image_processor_config(no_resize, kTile);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("do_resize false"), std::string::npos) << refused.status().message();
  // A LLaVA-NeXT processor for a LLaVA-OneVision model (or the other way) is refused at load.
  const testing::TempDir dir("llava_onevision_proc");
  nlohmann::json j = base;
  j["image_processor_type"] = "LlavaNextImageProcessor";
  j["crop_size"] = {{"height", kTile}, {"width", kTile}};
  std::ofstream(dir.file("preprocessor_config.json")) << j.dump();
  auto c = model_llava_next_image_processor(dir.str(), fixture_vision().anyres);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.status().message().find("is not LLaVA-OneVision's"), std::string::npos) << c.status().message();
}

// ---- The tower ----

TEST(LlavaOnevisionVision, FeaturesMatchTransformersAloneAndAsOneOfSeveral) {
  const nlohmann::json j = fixture_json(kFixture, "expected.json");
  std::vector<StepImage> images = read_alone();
  const std::vector<StepImage> base = read_base();
  images.insert(images.end(), base.begin(), base.end());
  std::vector<std::vector<float>> want = testing::read_image_features(j);
  const std::vector<std::vector<float>> want_base = read_base_features(j);
  want.insert(want.end(), want_base.begin(), want_base.end());
  auto t = load_tower();
  ASSERT_NE(t, nullptr);
  for (size_t k = 0; k < images.size(); ++k)
    EXPECT_EQ(static_cast<size_t>(t->v.image_features(images[k].grid_h, images[k].grid_w)) * kTextHidden, want[k].size());
  // Resized, base-only and plain images in one call.
  const float worst = testing::expect_features_alone_and_together(*t, images, want, {2, 7, 0, 9, 5, 3, 10}, kTol);
  std::printf("[ measured ] llava_onevision: largest relative feature difference from transformers: %.3g\n", worst);
}

TEST(LlavaOnevisionVision, BadImagesAreRefusedBeforeRunning) {
  auto t = load_tower();
  ASSERT_NE(t, nullptr);
  StepImage im = read_alone().at(0);  // 40 x 60: the base tile and 6 tiles
  im.grid_h = im.grid_w = 0;          // as base only it must be one tile
  const int n = t->v.image_features(0, 0);
  auto buf = t->backend->allocate(static_cast<size_t>(n) * kTextHidden * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  Status st = t->tower.encode({&im, 1}, buf->view(DType::f32, {n, kTextHidden}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("base tile and 0 tiles"), std::string::npos) << st.message();
  im.grid_h = -1;
  st = t->tower.encode({&im, 1}, buf->view(DType::f32, {n, kTextHidden}));
  EXPECT_NE(st.message().find("or 0 x 0 for an image that is its base tile alone"), std::string::npos) << st.message();
}

// ---- The language model with images ----

class LlavaOnevisionModel : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<StepImage> pixels = read_alone();
    const std::vector<StepImage> base = read_base();
    ASSERT_EQ(pixels.size(), kImages);
    ASSERT_EQ(base.size(), kImages);
    pixels.insert(pixels.end(), base.begin(), base.end());  // the cases' images kImages + k: image k as one of several
    prompts_.load({.fixture = kFixture, .kind = VisionKind::llava, .markers = {.image = kImage},
                   .max_batch_tokens = 512, .pages = 40},
                  std::move(pixels));
    ASSERT_TRUE(prompts_.loaded());
  }
  testing::ImagePrompts prompts_;
};

TEST_F(LlavaOnevisionModel, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const float worst = prompts_.expect_prompts_match(kLogitTol);
  std::printf("[ measured ] llava_onevision: largest |logit difference| from transformers: %.3g\n", worst);
}

// Chunks of 29 and 64 rows cut the images (and their newline rows) anywhere.
TEST_F(LlavaOnevisionModel, ChunksCuttingImagesGiveTheSameLogits) { prompts_.expect_chunks_match(kLogitTol, {29, 64}); }

}  // namespace
}  // namespace brigade
