// The Idefics3 / SmolVLM image processor against transformers 5.25's Idefics3ImageProcessorPil
// (tests/fixtures/idefics3: do_image_splitting, 32-pixel tiles, longest edge 96; tests/fixtures/smolvlm:
// no splitting; written by scripts/make_idefics3_fixtures.py): the PNGs' tiles, grids and tile
// counts, the processor's rows / cols for more sizes at the fixture's and the real checkpoints'
// settings, the fixtures' configs read and bad ones refused by field, and the tower's tile checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "hf_fixture.h"
#include "model_test_util.h"
#include "models/idefics3_image_processor.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::fixture_dir;

// The fixture's expected.json, or null when the fixture is absent (the caller skips).
json expected_of(const std::string& fixture) {
  const std::string path = fixture_dir(fixture) + "/expected.json";
  if (!std::filesystem::exists(path)) return nullptr;
  return testing::read_json(path);
}

#define SKIP_WITHOUT(j, fixture) \
  if ((j).is_null()) GTEST_SKIP() << "test data absent: " << fixture_dir(fixture) << " (scripts/make_idefics3_fixtures.py)"

std::vector<float> read_f32(const std::string& path) {
  const std::vector<uint8_t> bytes = testing::read_bytes(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));  // little-endian host, as the fixture
  return out;
}

class Idefics3Pixels : public ::testing::TestWithParam<std::string> {};

// Each PNG through the fixture's preprocessor_config.json gives Idefics3ImageProcessorPil's tiles
// (pixel_values.f32 holds every image's in order), rows / cols and tile count.
TEST_P(Idefics3Pixels, PngsGiveTransformersTiles) {
  const json want = expected_of(GetParam());
  SKIP_WITHOUT(want, GetParam());
  const int tile = want.at("tile").get<int>(), patch = want.at("patch_size").get<int>();
  auto config = model_idefics3_image_processor(fixture_dir(GetParam()), tile);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  const std::vector<float> all = read_f32(fixture_dir(GetParam()) + "/pixel_values.f32");
  const size_t tile_values = size_t{3} * tile * tile;
  size_t at = 0;
  float worst = 0.0f;
  for (size_t k = 0; k < want.at("images").size(); ++k) {
    SCOPED_TRACE("image " + std::to_string(k));
    const json& im = want.at("images")[k];
    const auto hw = im.at("source_hw").get<std::vector<int>>();
    const int rows = im.at("rows").get<int>(), cols = im.at("cols").get<int>();
    const size_t n_tiles = im.at("n_tiles").get<size_t>();
    EXPECT_EQ(idefics3_tile_grid(hw[0], hw[1], *config), std::make_pair(rows, cols));
    EXPECT_EQ(size_t(rows) * cols + 1, n_tiles);
    const std::vector<uint8_t> png = testing::read_bytes(fixture_dir(GetParam()) + "/image" + std::to_string(k) + ".png");
    auto got = idefics3_image_pixels(png, *config, patch);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ(got->grid_h, std::max(rows, 1) * (tile / patch));
    EXPECT_EQ(got->grid_w, std::max(cols, 1) * (tile / patch));
    ASSERT_EQ(got->pixels.size(), n_tiles * tile_values);
    ASSERT_LE(at + got->pixels.size(), all.size());
    for (size_t i = 0; i < got->pixels.size(); ++i) worst = std::max(worst, std::fabs(got->pixels[i] - all[at + i]));
    at += got->pixels.size();
  }
  EXPECT_EQ(at, all.size()) << "pixel_values.f32 holds exactly the images' tiles";
  EXPECT_LE(worst, 1e-6f);
  std::printf("[ measured ] %s: largest |pixel_values difference| from Idefics3ImageProcessorPil: %.3g\n",
              GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Idefics3Pixels, ::testing::Values("idefics3", "smolvlm"));

// expected.json's `tiling`: get_number_of_image_patches' rows / cols at the fixture's settings
// and at SmolVLM-256M / 500M's (2048 / 512), Idefics3-8B's (1456 / 364) and SmolVLM2-2.2B's
// (1536 / 384), extreme aspect ratios and MAX_IMAGE_SIZE's clamp included.
TEST(Idefics3ImageProcessor, TileGridMatchesTransformers) {
  const json want = expected_of("idefics3");
  SKIP_WITHOUT(want, "idefics3");
  ASSERT_GE(want.at("tiling").size(), 40u);
  for (const json& t : want.at("tiling")) {
    Idefics3ImageProcessorConfig c;
    c.longest_edge = t.at("longest_edge").get<int>();
    c.tile = t.at("tile").get<int>();
    const auto hw = t.at("hw").get<std::vector<int>>();
    EXPECT_EQ(idefics3_tile_grid(hw[0], hw[1], c), std::make_pair(t.at("rows").get<int>(), t.at("cols").get<int>()))
        << hw[0] << "x" << hw[1] << " at longest_edge " << c.longest_edge << ", tile " << c.tile;
  }
}

// Rows / cols Idefics3ImageProcessorPil's preprocess returned (transformers 5.25) where the
// arithmetic has corners: an odd longest_edge (a square image becomes 97 wide, 98 tall, so tall),
// MAX_IMAGE_SIZE's clamp after an 8192 resize, a longest_edge that is not whole tiles (where
// get_number_of_image_patches says 3 x 4 and 4 x 3: resize_for_vision_encoder's int(W' / (w / h))
// rounds up past the original side), and no splitting.
TEST(Idefics3ImageProcessor, TileGridCornersMatchThePreprocessedImages) {
  struct Case {
    int longest_edge, tile, height, width;
    bool split;
    std::pair<int, int> rows_cols;
  };
  const Case cases[] = {{97, 32, 50, 50, true, {4, 4}},     {8192, 512, 300, 5000, true, {1, 8}},
                        {1000, 300, 4, 5, true, {4, 4}},     {1000, 300, 5, 4, true, {4, 4}},
                        {97, 32, 50, 50, false, {0, 0}},     {33, 32, 7, 200, true, {1, 2}}};
  for (const Case& k : cases) {
    Idefics3ImageProcessorConfig c;
    c.longest_edge = k.longest_edge, c.tile = k.tile, c.do_image_splitting = k.split;
    EXPECT_EQ(idefics3_tile_grid(k.height, k.width, c), k.rows_cols)
        << k.height << "x" << k.width << " at longest_edge " << k.longest_edge << ", tile " << k.tile;
  }
}

TEST(Idefics3ImageProcessor, ReadsTheFixtureConfigsAndDefaults) {
  SKIP_WITHOUT(expected_of("idefics3"), "idefics3");
  SKIP_WITHOUT(expected_of("smolvlm"), "smolvlm");
  const auto fixture_config = [](const std::string& fixture) {
    return parse_idefics3_image_processor_config(testing::read_json(fixture_dir(fixture) + "/preprocessor_config.json"));
  };
  auto split = fixture_config("idefics3");
  ASSERT_TRUE(split.has_value()) << split.status().to_string();
  EXPECT_EQ(split->longest_edge, 96);
  EXPECT_EQ(split->tile, 32);
  EXPECT_TRUE(split->do_image_splitting);
  EXPECT_EQ(split->steps.resample, Resample::lanczos);
  EXPECT_DOUBLE_EQ(split->steps.rescale_factor, 1.0 / 255.0);
  EXPECT_EQ(split->steps.image_mean, (std::array<double, 3>{0.5, 0.5, 0.5}));
  auto single = fixture_config("smolvlm");
  ASSERT_TRUE(single.has_value()) << single.status().to_string();
  EXPECT_FALSE(single->do_image_splitting);

  auto d = parse_idefics3_image_processor_config(json::object());  // Idefics3ImageProcessor's class defaults
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->longest_edge, 1456);
  EXPECT_EQ(d->tile, 364);
  EXPECT_TRUE(d->do_image_splitting && d->steps.do_resize && d->steps.do_convert_rgb);
  EXPECT_EQ(d->steps.resample, Resample::lanczos);
  EXPECT_EQ(d->steps.image_std, (std::array<double, 3>{0.5, 0.5, 0.5}));
  // SmolVLM2's names and fields, nested as processor_config.json holds them.
  auto smol = parse_idefics3_image_processor_config(json::parse(
      R"({"image_processor": {"image_processor_type": "SmolVLMImageProcessor", "size": {"longest_edge": 1536},
          "max_image_size": {"longest_edge": 384}, "resample": 3, "do_pad": true, "video_sampling": {"fps": 1}}})"));
  ASSERT_TRUE(smol.has_value()) << smol.status().to_string();
  EXPECT_EQ(smol->image_processor_type, "SmolVLMImageProcessor");
  EXPECT_EQ(smol->longest_edge, 1536);
  EXPECT_EQ(smol->tile, 384);
  EXPECT_EQ(smol->steps.resample, Resample::bicubic);
  // No splitting needs no longest-edge resize.
  auto unresized =
      parse_idefics3_image_processor_config(json::parse(R"({"do_resize": false, "do_image_splitting": false})"));
  ASSERT_TRUE(unresized.has_value()) << unresized.status().to_string();
}

TEST(Idefics3ImageProcessor, RefusesBadConfigsNamingTheField) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"image_processor_type": "GotOcr2ImageProcessor"})", "valid: Idefics3ImageProcessor"},
      {R"({"resample": 0})", "valid: 1 (LANCZOS), 2 (BILINEAR), 3 (BICUBIC)"},
      {R"({"resample": 4})", "valid: 1 (LANCZOS)"},
      {R"({"resample": "lanczos"})", "resample"},
      {R"({"size": {"height": 364, "width": 364}})", "size"},
      {R"({"size": {"longest_edge": 0}})", "size"},
      {R"({"size": {"longest_edge": 96.5}})", "size"},
      {R"({"max_image_size": {"height": 364}})", "max_image_size"},
      {R"({"max_image_size": {"longest_edge": -364}})", "max_image_size"},
      {R"({"max_image_size": 364})", "max_image_size"},
      {R"({"do_image_splitting": "yes"})", "do_image_splitting"},
      {R"({"do_resize": false})", "do_resize false with do_image_splitting true"},
      {R"({"max_image_size": {"longest_edge": 8000}})", "max_image_size.longest_edge 8000"},
      {R"({"max_image_size": {"longest_edge": 9000}, "do_image_splitting": false})", "max_image_size.longest_edge 9000"},
      {R"({"image_std": [0.5, 0, 0.5]})", "image_std"},
      {R"([1, 2])", "not a JSON object"},
  };
  for (const auto& [text, needle] : bad) {
    auto c = parse_idefics3_image_processor_config(json::parse(text));
    ASSERT_FALSE(c.has_value()) << text;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << text << " -> " << c.status().to_string();
  }
}

// The file's tile must be the tower's image_size; a directory without a processor file is not_found.
TEST(Idefics3ImageProcessor, ModelProcessorChecksTheTowersTile) {
  const json want = expected_of("idefics3");
  SKIP_WITHOUT(want, "idefics3");
  auto ok = model_idefics3_image_processor(fixture_dir("idefics3") + "/config.json", 32);  // a file in the directory
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  auto other = model_idefics3_image_processor(fixture_dir("idefics3"), 48);
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(other.status().message().find("tiles of 32 pixels (max_image_size.longest_edge)"), std::string::npos)
      << other.status().to_string();
  EXPECT_NE(other.status().message().find("preprocessor_config.json"), std::string::npos);
  const std::filesystem::path empty = std::filesystem::temp_directory_path() / "brigade_idefics3_no_processor";
  std::filesystem::create_directories(empty);
  auto none = model_idefics3_image_processor(empty.string(), 32);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.status().code(), StatusCode::not_found);
  std::filesystem::remove_all(empty);
}

}  // namespace
}  // namespace brigade
