// The Qwen2-VL image processor against transformers 5's Qwen2VLImageProcessorPil
// (tests/fixtures/images_qwen, written by scripts/make_qwen_image_fixtures.py): pixel_values and
// image_grid_thw, smart_resize's table, how config files load, and bad input refused.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "models/qwen_image_processor.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::read_bytes;

// A file under tests/fixtures (the pixel cases reuse tests/fixtures/images' files);
// BRIGADE_FIXTURES_DIR, when set, moves the folder.
std::vector<uint8_t> fixture_bytes(const std::string& path) {
  const char* moved = std::getenv("BRIGADE_FIXTURES_DIR");
  return read_bytes((moved && *moved ? std::string(moved) : std::string(BRIGADE_FIXTURES)) + "/" + path);
}

const json& cases() {
  static const json parsed = json::parse(fixture_bytes("images_qwen/cases.json"));
  return parsed;
}

// A little-endian float32 file (the host's order too).
std::vector<float> fixture_floats(const std::string& path) {
  const std::vector<uint8_t> bytes = fixture_bytes(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

QwenImageProcessorConfig parse_ok(const json& j) {
  auto c = parse_qwen_image_processor_config(j);
  EXPECT_TRUE(c.has_value()) << j.dump() << ": " << c.status().to_string();
  return c ? *c : QwenImageProcessorConfig{};
}

TEST(QwenImageProcessor, MatchesTransformersPixelValuesAndGrid) {
  ASSERT_GE(cases()["pixels"].size(), 8u);
  for (const json& c : cases()["pixels"]) {
    SCOPED_TRACE(c["image"].get<std::string>() + " config " + c["config"].get<std::string>());
    const QwenImageProcessorConfig config = parse_ok(cases()["configs"][c["config"].get<std::string>()]);
    auto got = qwen_image_pixels(fixture_bytes(c["image"]), config);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ(c["grid_thw"], json::array({1, got->grid_h, got->grid_w}));
    EXPECT_EQ(c["shape"], json::array({got->grid_h * got->grid_w, config.patch_values()}));
    const std::vector<float> want = fixture_floats("images_qwen/" + c["file"].get<std::string>());
    ASSERT_EQ(got->pixels.size(), want.size());
    size_t n_inexact = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got->pixels[i], want[i], 1e-6f) << "row " << i / config.patch_values() << " column "
                                                  << i % config.patch_values();
      n_inexact += got->pixels[i] != want[i];
    }
    EXPECT_EQ(n_inexact, 0u) << "expected bit-exact values";
  }
}

// The row order, spelled out on a tiny image: no resize, rescale or normalisation, so each value
// is the pixel it came from. P = 2, M = 2, T = 2 on 8 x 4 pixels: a 2 x 4 grid, 2 merge blocks.
TEST(QwenImageProcessor, PatchRowsAreMergeBlocksOfChannelFramePixelPatches) {
  Image img{8, 4, std::vector<uint8_t>(8 * 4 * 3), {}};
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 8; ++x) {
      for (int c = 0; c < 3; ++c) img.rgb[(y * 8 + x) * 3 + c] = uint8_t(c * 100 + y * 8 + x);
    }
  }
  QwenImageProcessorConfig config;
  config.patch_size = config.merge_size = config.temporal_patch_size = 2;
  config.do_resize = config.do_rescale = config.do_normalize = false;
  auto got = preprocess_qwen(img, config);
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  ASSERT_EQ(got->grid_h, 2);
  ASSERT_EQ(got->grid_w, 4);
  ASSERT_EQ(got->pixels.size(), 8u * 24);
  const int grid_of_row[8][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}};
  for (int row = 0; row < 8; ++row) {
    for (int col = 0; col < 24; ++col) {
      const int c = col / 8, py = col / 2 % 2, px = col % 2;  // [c][t][py][px]
      const int y = grid_of_row[row][0] * 2 + py, x = grid_of_row[row][1] * 2 + px;
      EXPECT_EQ(got->pixels[row * 24 + col], float(c * 100 + y * 8 + x)) << "row " << row << " col " << col;
    }
  }
}

TEST(QwenSmartResize, MatchesTransformersTable) {
  ASSERT_GE(cases()["smart_resize"].size(), 300u);
  for (const json& c : cases()["smart_resize"]) {
    SCOPED_TRACE(c.dump());
    auto got = smart_resize(c["height"], c["width"], c["factor"], c["min_pixels"], c["max_pixels"]);
    if (c.contains("error")) {
      ASSERT_FALSE(got.has_value());
      EXPECT_EQ(got.status().code(), StatusCode::invalid_argument);
      EXPECT_NE(got.status().message().find("absolute aspect ratio must be smaller than 200"), std::string::npos)
          << got.status().to_string();
      continue;
    }
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ(c["resized"], json::array({got->first, got->second}));
  }
}

TEST(QwenSmartResize, RefusesArgumentsOutOfRange) {
  EXPECT_FALSE(smart_resize(0, 10, 28, 3136, 1003520).has_value());
  EXPECT_FALSE(smart_resize(10, kMaxImageSide + 1, 28, 3136, 1003520).has_value());
  EXPECT_FALSE(smart_resize(10, 10, 0, 3136, 1003520).has_value());
  EXPECT_FALSE(smart_resize(10, 10, 28, 0, 1003520).has_value());
  EXPECT_FALSE(smart_resize(10, 10, 28, 3136, int64_t{1} << 41).has_value());
  EXPECT_FALSE(smart_resize(10, 10, 28, 3136, -1).has_value());
  auto huge = smart_resize(1, 200, 28, int64_t{1} << 40, int64_t{1} << 40);  // the largest sides it returns
  ASSERT_TRUE(huge.has_value()) << huge.status().to_string();
  EXPECT_EQ(huge->second % 28, 0);
  EXPECT_GT(huge->second, 14000000);
}

// Each probe file loads as transformers loads it (same pixel budget and fields), or is refused
// where transformers fails to preprocess with it.
TEST(QwenImageConfig, LoadsAsTransformers) {
  ASSERT_GE(cases()["config_probes"].size(), 10u);
  for (const json& probe : cases()["config_probes"]) {
    SCOPED_TRACE(probe["config"].dump());
    auto c = parse_qwen_image_processor_config(probe["config"]);
    if (probe.contains("error")) {
      ASSERT_FALSE(c.has_value());
      EXPECT_EQ(c.status().code(), StatusCode::corrupt);
      EXPECT_NE(c.status().message().find("preprocessor_config.json: field '"), std::string::npos)
          << c.status().to_string();
      continue;
    }
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    const json& want = probe["parsed"];
    EXPECT_EQ(c->min_pixels, want["min_pixels"].get<int64_t>());
    EXPECT_EQ(c->max_pixels, want["max_pixels"].get<int64_t>());
    EXPECT_EQ(c->patch_size, want["patch_size"].get<int>());
    EXPECT_EQ(c->temporal_patch_size, want["temporal_patch_size"].get<int>());
    EXPECT_EQ(c->merge_size, want["merge_size"].get<int>());
    EXPECT_EQ(int(c->resample), want["resample"].get<int>());
    EXPECT_EQ(c->do_resize, want["do_resize"].get<bool>());
    EXPECT_EQ(c->do_rescale, want["do_rescale"].get<bool>());
    EXPECT_EQ(c->rescale_factor, want["rescale_factor"].get<double>());
    EXPECT_EQ(c->do_normalize, want["do_normalize"].get<bool>());
    EXPECT_EQ(c->image_mean, (want["image_mean"].get<std::array<double, 3>>()));
    EXPECT_EQ(c->image_std, (want["image_std"].get<std::array<double, 3>>()));
    EXPECT_EQ(c->do_convert_rgb, want["do_convert_rgb"].get<bool>());
  }
}

TEST(QwenImageConfig, ProcessorConfigNestsTheFields) {
  const QwenImageProcessorConfig c = parse_ok(json::parse(
      R"({"processor_class": "Qwen2_5_VLProcessor", "image_processor": {"max_pixels": 9000, "merge_size": 1}})"));
  EXPECT_EQ(c.max_pixels, 9000);
  EXPECT_EQ(c.min_pixels, 3136);
  EXPECT_EQ(c.merge_size, 1);
  EXPECT_EQ(c.factor(), 14);
}

TEST(QwenImageConfig, RefusesBadFieldsNamingThem) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"image_processor_type": "Gemma3ImageProcessor"})", "valid: Qwen2VLImageProcessor"},
      {R"({"image_processor_type": 7})", "'image_processor_type'"},
      {R"({"patch_size": "14"})", "'patch_size' must be an integer in [1, 128]"},
      {R"({"patch_size": 0})", "'patch_size'"},
      {R"({"temporal_patch_size": 5})", "'temporal_patch_size' must be an integer in [1, 4]"},
      {R"({"merge_size": -2})", "'merge_size'"},
      {R"({"min_pixels": 3136.5})", "'min_pixels'"},
      {R"({"max_pixels": 99999999999})", "'max_pixels' must be an integer in [1, 16777216]"},
      {R"({"max_pixels": 18446744073709551615})", "'max_pixels'"},
      {R"({"min_pixels": 5000, "max_pixels": 4000})", "'min_pixels' (size.shortest_edge) must be at most"},
      {R"({"size": 448})", "'size'"},
      {R"({"size": {"shortest_edge": "56", "longest_edge": 784}})", "'size.shortest_edge'"},
      {R"({"size": {"height": 224, "width": 224}})", "'size' must hold both shortest_edge and longest_edge"},
      {R"({"resample": 1})", "valid: 2 (BILINEAR), 3 (BICUBIC)"},
      {R"({"image_mean": [0.5, 0.5]})", "'image_mean'"},
      {R"({"image_std": [0.5, 0, 0.5]})", "'image_std'"},
      {R"({"do_resize": "yes"})", "'do_resize'"},
      {R"({"rescale_factor": "1/255"})", "'rescale_factor'"},
      {"[1, 2]", "not a JSON object"},
      {"{not json", "not valid JSON"},
  };
  for (const auto& [text, needle] : bad) {
    auto c = parse_qwen_image_processor_config(std::string(text));
    ASSERT_FALSE(c.has_value()) << text;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << text << " -> " << c.status().to_string();
  }
}

TEST(QwenImageConfig, ModelDirectoryFilesOrDefaults) {
  testing::TempDir dir("qwen_image");
  auto c = model_qwen_image_processor(dir.str());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->max_pixels, 28 * 28 * 1280);
  EXPECT_EQ(c->image_processor_type, "Qwen2VLImageProcessor");

  testing::write_text(dir.file("processor_config.json"), R"({"image_processor": {"max_pixels": 6000}})");
  c = model_qwen_image_processor(dir.file("config.json"));  // a file in the directory names it too
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->max_pixels, 6000);

  testing::write_text(dir.file("preprocessor_config.json"), R"({"max_pixels": 7000})");  // preferred
  c = model_qwen_image_processor(dir.str());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->max_pixels, 7000);

  testing::write_text(dir.file("preprocessor_config.json"), R"({"image_processor_type": "SiglipImageProcessor"})");
  c = model_qwen_image_processor(dir.str());
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::unsupported);
  EXPECT_NE(c.status().message().find(dir.file("preprocessor_config.json")), std::string::npos);
}

TEST(QwenImageProcessor, RefusesCorruptAndTruncatedBytes) {
  const QwenImageProcessorConfig config;
  EXPECT_FALSE(qwen_image_pixels({}, config).has_value());
  const std::vector<uint8_t> junk = {'G', 'I', 'F', '8', '9', 'a', 1, 2, 3};
  EXPECT_EQ(qwen_image_pixels(junk, config).status().code(), StatusCode::unsupported);
  for (const char* file : {"images_qwen/wide_100x60.png", "images/baseline_37x23.jpg"}) {
    const std::vector<uint8_t> bytes = fixture_bytes(file);
    ASSERT_GT(bytes.size(), 100u) << file;
    for (size_t cut : {size_t(12), size_t(40), bytes.size() / 2, bytes.size() - 20}) {
      auto got = qwen_image_pixels(std::span(bytes).first(cut), config);
      ASSERT_FALSE(got.has_value()) << file << " cut at " << cut;
      EXPECT_EQ(got.status().code(), StatusCode::corrupt) << got.status().to_string();
    }
  }
}

TEST(QwenImageProcessor, RefusesUnpatchableAndOversizedImages) {
  const Image tiny{1, 1, {10, 20, 30}, {}};
  const Image thin{201, 1, std::vector<uint8_t>(201 * 3, 7), {}};
  QwenImageProcessorConfig config;
  auto got = preprocess_qwen(thin, config);  // transformers' aspect-ratio ValueError
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(got.status().message().find("aspect ratio"), std::string::npos) << got.status().to_string();

  config.do_resize = false;  // 1 x 1 is not a multiple of 28
  got = preprocess_qwen(tiny, config);
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.status().message().find("multiples of patch_size * merge_size = 28"), std::string::npos)
      << got.status().to_string();

  // A budget at the limit: the upscale of 1 x 1 lands on 4116 x 4116, above 2^24 pixels; that of
  // 199 x 1 on a side of 57792. Both are refused before any pixel is resized.
  config = parse_ok(json{{"min_pixels", 1 << 24}, {"max_pixels", 1 << 24}});
  for (const Image& img : {tiny, Image{199, 1, std::vector<uint8_t>(199 * 3, 7), {}}}) {
    got = preprocess_qwen(img, config);
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(got.status().message().find("above brigade's limits"), std::string::npos) << got.status().to_string();
  }
}

// A deployment's bounds (vLLM's --mm-processor-kwargs) replace the file's; max_pixels comes down
// to what max_tokens tokens hold, and a 1920x1080 photo then resizes within it.
TEST(QwenImageProcessor, BoundsReplaceTheFilesAndCapTheTokens) {
  QwenImageProcessorConfig c;  // 3136..1003520 pixels, 28-pixel tokens
  ASSERT_TRUE(bound_qwen_pixels(c, 0, 0, 0).is_ok());
  EXPECT_EQ(c.min_pixels, 3136);
  EXPECT_EQ(c.max_pixels, 1003520);
  ASSERT_TRUE(bound_qwen_pixels(c, 784, 12845056, 0).is_ok());
  EXPECT_EQ(c.min_pixels, 784);
  EXPECT_EQ(c.max_pixels, 12845056);
  ASSERT_TRUE(bound_qwen_pixels(c, 0, 0, 512).is_ok());
  EXPECT_EQ(c.max_pixels, 512 * 28 * 28);
  auto hw = smart_resize(1080, 1920, c.factor(), c.min_pixels, c.max_pixels);
  ASSERT_TRUE(hw.has_value());
  EXPECT_LE((hw->first / 28) * (hw->second / 28), 512);
  ASSERT_TRUE(bound_qwen_pixels(c, 1 << 20, 0, 4).is_ok());  // min above the cap comes down to it
  EXPECT_EQ(c.max_pixels, 4 * 784);
  EXPECT_EQ(c.min_pixels, 4 * 784);
  EXPECT_FALSE(bound_qwen_pixels(c, 1000, 999, 0).is_ok());
}

}  // namespace
}  // namespace brigade
