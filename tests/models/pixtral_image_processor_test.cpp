// Mistral 3's Pixtral image processor against references (tests/fixtures/mistral3_vision, written
// by scripts/make_pixtral_fixtures.py): the PNGs' pixel_values and sizes against transformers 5's
// PixtralImageProcessorPil (resized down to the longest edge, and up to whole tokens), each
// image's token layout against mistral-common's ImageEncoder, the resize rule's table, how the
// config loads, and bad configs refused by field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "models/pixtral_image_processor.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::read_bytes;

std::vector<uint8_t> fixture_bytes(const std::string& path) {
  const char* moved = std::getenv("BRIGADE_FIXTURES_DIR");
  return read_bytes((moved && *moved ? std::string(moved) : std::string(BRIGADE_FIXTURES)) + "/mistral3_vision/" +
                    path);
}

json fixture_json(const std::string& path) {
  const std::vector<uint8_t> bytes = fixture_bytes(path);
  return json::parse(bytes.begin(), bytes.end());
}

// The fixture's processor: its preprocessor_config.json, the model's spatial_merge_size 2.
PixtralImageProcessorConfig fixture_config() {
  auto c = parse_pixtral_image_processor_config(fixture_json("preprocessor_config.json"), 2);
  EXPECT_TRUE(c.has_value()) << c.status().to_string();
  return c ? *c : PixtralImageProcessorConfig{};
}

TEST(PixtralImageProcessor, ReadsTheFixturesConfig) {
  const PixtralImageProcessorConfig c = fixture_config();
  EXPECT_EQ(c.patch_size, 4);  // {"height": 4, "width": 4}
  EXPECT_EQ(c.longest_edge, 48);
  EXPECT_EQ(c.merge_size, 2);
  EXPECT_EQ(c.factor(), 8);
  EXPECT_EQ(c.steps.resample, Resample::bicubic);
}

// pixel_values as transformers computes them, patchified as the tower reads them; 32x48 grows
// from 28x42 (bicubic), 16x8 is kept, 48x16 shrinks from 90x30.
TEST(PixtralImageProcessor, MatchesTransformersPixelValuesAndSizes) {
  const json expected = fixture_json("expected.json");
  const PixtralImageProcessorConfig config = fixture_config();
  QwenImageProcessorConfig rows;
  rows.patch_size = 4, rows.merge_size = 2, rows.temporal_patch_size = 1;
  size_t k = 0;
  float worst = 0.0f;
  for (const json& im : expected.at("images")) {
    SCOPED_TRACE("image" + std::to_string(k));
    auto decoded = decode_image(fixture_bytes("image" + std::to_string(k++) + ".png"));
    ASSERT_TRUE(decoded.has_value()) << decoded.status().to_string();
    auto got = preprocess_pixtral(*decoded, config);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    const auto hw = im.at("image_sizes").get<std::vector<int>>();
    EXPECT_EQ(got->grid_h * 4, hw.at(0));
    EXPECT_EQ(got->grid_w * 4, hw.at(1));
    std::vector<float> chw;
    for (const auto& ch : im.at("pixel_values"))
      for (const auto& row : ch) for (float v : row.get<std::vector<float>>()) chw.push_back(v);
    const std::vector<float> want = patchify_qwen(chw, hw.at(0), hw.at(1), rows).pixels;
    ASSERT_EQ(got->pixels.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got->pixels[i] - want[i]));
    EXPECT_LE(worst, 1e-6f);
  }
  std::printf("[ measured ] largest difference from transformers' pixel_values: %.3g\n", worst);
}

TEST(PixtralImageProcessor, TokenLayoutIsMistralCommons) {
  const json expected = fixture_json("expected.json");
  for (const json& im : expected.at("images")) {
    const auto hw = im.at("image_sizes").get<std::vector<int>>();
    EXPECT_EQ(pixtral_image_tokens(hw.at(0) / 4, hw.at(1) / 4, 2, 10, 12, 13), im.at("tokens").get<std::vector<int32_t>>());
  }
}

// get_resize_output_image_size with PixtralProcessor's patch_size * merge (Mistral Small 3.1:
// 14 * 2, longest edge 1540): down by the larger side's ratio (floored), then up to whole tokens.
TEST(PixtralImageProcessor, ResizeRuleFitsThenRoundsUpToWholeTokens) {
  using P = std::pair<int, int>;
  EXPECT_EQ(pixtral_resize(28, 42, 48, 8), P(32, 48));
  EXPECT_EQ(pixtral_resize(90, 30, 48, 8), P(48, 16));
  EXPECT_EQ(pixtral_resize(16, 8, 48, 8), P(16, 8));
  EXPECT_EQ(pixtral_resize(1, 1, 1540, 28), P(28, 28));
  EXPECT_EQ(pixtral_resize(3000, 2000, 1540, 28), P(1540, 1036));  // 1026.67 -> 1026 -> 37 tokens
  EXPECT_EQ(pixtral_resize(4000, 10, 1540, 28), P(1540, 28));       // the thin side floors to 3
}

TEST(PixtralImageProcessor, RefusesBadConfigsByField) {
  const json base = fixture_json("preprocessor_config.json");
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"image_processor_type", "Qwen2VLImageProcessor"}}, "image_processor_type 'Qwen2VLImageProcessor'"},
      {{{"patch_size", {{"height", 4}, {"width", 8}}}}, "'patch_size' must have equal height and width"},
      {{{"patch_size", 0}}, "'patch_size' must be an integer in [1, 128]"},
      {{{"size", {{"height", 10}, {"width", 10}}}}, "'size' must be {\"longest_edge\": N}"},
      {{{"size", {{"longest_edge", -3}}}}, "'size.longest_edge' must be an integer"},
      {{{"resample", 0}}, "resample"},
      {{{"image_std", {1.0, 0.0, 1.0}}}, "image_std"},
  };
  for (const auto& [patch, want] : cases) {
    json j = base;
    j.update(patch);
    const auto c = parse_pixtral_image_processor_config(j, 2);
    ASSERT_FALSE(c.has_value()) << j.dump();
    EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
  }
}

// Without do_resize, an image whose sides are not whole tokens is refused with the reason.
TEST(PixtralImageProcessor, WithoutResizeRefusesSidesThatAreNotWholeTokens) {
  PixtralImageProcessorConfig c = fixture_config();
  c.steps.do_resize = false;
  auto decoded = decode_image(fixture_bytes("image0.png"));  // 42x28
  ASSERT_TRUE(decoded.has_value());
  const auto got = preprocess_pixtral(*decoded, c);
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.status().message().find("multiples of patch_size * spatial_merge_size = 8"), std::string::npos);
}

}  // namespace
}  // namespace brigade
