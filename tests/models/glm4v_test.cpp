// GLM-4.1V (Glm4vForConditionalGeneration) and GLM-4.5V / 4.6V (Glm4vMoeForConditionalGeneration)
// against transformers (tests/fixtures/glm4v and glm4v_moe, written by
// scripts/make_glm4v_fixtures.py): the config read as a GLM-4 / GLM-4.5 decoder with M-RoPE beside
// the GLM tower; Glm4vImageProcessorPil's pixel_values from the PNGs; the tower's features
// (get_image_features' pooler_output) for images alone and together, and with the position table
// or the downsample's patch order broken (which the comparison must catch); get_rope_index's
// positions; every position's logits and the greedy tokens of prompts holding images, whole and
// in chunks that cut the images anywhere; refused configs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hf_fixture.h"
#include "image_prompts.h"
#include "model_test_util.h"
#include "tests/vision_fixture.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/mrope.h"
#include "models/qwen_image_processor.h"
#include "models/qwen_vision.h"
#include "models/qwen_vl_config.h"
#include "models/safetensors.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::encode_images;
using testing::fixture_dir;
using testing::fixture_json;
using testing::make_step;
using testing::relative_error;

constexpr int32_t kImageStart = 266, kImageEnd = 267, kImageToken = 270;
constexpr int kMerge = 2, kTextHidden = 32;
constexpr float kFeatureTol = 1e-4f;  // relative, fp32 both sides, sums in other orders
constexpr float kLogitTol = 5e-4f;

struct GlmImage {
  testing::QwenVlImage image;
  std::vector<float> features;  // [tokens * kTextHidden]
};

struct GlmFixture {
  std::vector<GlmImage> images;
  std::vector<testing::QwenVlCase> cases;
};

// The fixture's cases and features; the pixel rows are glm4v's (both fixtures preprocess the same
// images with the same processor).
GlmFixture read_fixture(const std::string& name) {
  GlmFixture f;
  const auto j = fixture_json(name, "expected.json"), pixels = fixture_json("glm4v", "expected.json");
  for (size_t i = 0; i < j.at("images").size(); ++i) {
    const auto& im = j.at("images")[i];
    const auto thw = im.at("grid_thw").get<std::vector<int>>();
    auto px = std::make_shared<std::vector<float>>(testing::flatten_floats(pixels.at("images")[i].at("pixel_values")));
    f.images.push_back({{std::move(px), thw.at(1), thw.at(2)}, testing::flatten_floats(im.at("features"))});
  }
  for (const auto& c : j.at("cases"))
    f.cases.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                       c.at("logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>(),
                       c.at("position_ids").get<std::vector<std::vector<int32_t>>>(), c.at("rope_delta").get<int32_t>()});
  return f;
}

std::vector<StepImage> step_images(const GlmFixture& f) {
  std::vector<StepImage> out;
  for (const GlmImage& im : f.images) out.push_back({0, im.image.pixels, im.image.grid_h, im.image.grid_w});
  return out;
}

// The images of the prompt's rows [from, to) (a run of image tokens each, between the image's
// begin and end markers), placed from row 0 of the step, a cut one continuing at its token `first`.
std::vector<StepImage> images_of(const GlmFixture& f, const testing::QwenVlCase& c, size_t from, size_t to) {
  return testing::images_in_chunk(
      c.prompt, c.images, step_images(f), {.image = kImageToken, .begin = kImageStart, .end = kImageEnd},
      [](const StepImage& im) { return (im.grid_h / kMerge) * (im.grid_w / kMerge); }, from, to);
}

// The chunk [from, to) of a prompt as the scheduler sends it, shifted by the images before it.
StepBatch chunk_step(const GlmFixture& f, const testing::QwenVlCase& c, size_t from, size_t to, int page_size,
                     int pages) {
  const std::vector<int32_t> rows(c.prompt.begin() + static_cast<long>(from), c.prompt.begin() + static_cast<long>(to));
  StepBatch step = make_step({{0, rows, static_cast<int>(from), true}}, page_size, pages);
  step.images = images_of(f, c, from, to);
  int32_t delta = 0;
  size_t next = 0;
  for (size_t r = 0; r < from; ++r)
    if (c.prompt[r] == kImageToken && (r == 0 || c.prompt[r - 1] != kImageToken)) {
      const testing::QwenVlImage& im = f.images[static_cast<size_t>(c.images[next++])].image;
      const int32_t h = im.grid_h / kMerge, w = im.grid_w / kMerge;
      if (r + static_cast<size_t>(h * w) <= from) delta += mrope_image_shift(h, w);
    }
  step.rope_delta = {delta};
  return step;
}

class Glm4v : public ::testing::TestWithParam<const char*> {};

TEST_P(Glm4v, TheConfigIsAGlmDecoderWithMropeBesideTheGlmTower) {
  const std::string name = GetParam();
  auto c = parse_hf_config(fixture_json(name, "config.json").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_TRUE(c->multimodal_text);
  EXPECT_EQ(c->mrope_section, (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(c->rope_dims(), 8);  // partial_rotary_factor 0.5 of head_dim 16
  EXPECT_FALSE(c->qk_norm);
  EXPECT_TRUE(c->qkv_bias);
  if (name == "glm4v") {
    EXPECT_EQ(c->arch, "glm4");
    EXPECT_TRUE(c->sandwich_norms);
    EXPECT_EQ(c->rope_style, RopeStyle::interleaved);  // Glm4vText's rotate_half_llm: adjacent pairs
  } else {
    EXPECT_EQ(c->arch, "glm4_moe");
    EXPECT_EQ(c->rope_style, RopeStyle::neox);
    EXPECT_EQ(c->n_experts, 8);
  }
  const VisionConfig& v = c->vision;
  EXPECT_EQ(v.kind, VisionKind::glm4v);
  EXPECT_EQ(v.hidden_size, 32);
  EXPECT_EQ(v.intermediate_size, 32);  // the blocks' MLP: out_hidden_size
  EXPECT_EQ(v.merger_intermediate, 48);
  EXPECT_EQ(v.num_position_embeddings, 16);
  EXPECT_EQ(v.qkv_bias, name == "glm4v");
  EXPECT_EQ(v.image_token, kImageToken);
  EXPECT_EQ(v.boi_token, kImageStart);
  EXPECT_EQ(v.eoi_token, kImageEnd);
}

TEST(Glm4vConfig, PartialRotaryAndSectionDefaultsAreTransformers) {
  auto j = fixture_json("glm4v", "config.json");
  j["text_config"]["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  j["text_config"]["num_attention_heads"] = 1;  // head_dim 32: all of it rotated, sections 8 + 12 + 12 = 16
  j["text_config"]["num_key_value_heads"] = 1;
  j["text_config"]["hidden_size"] = 32;
  auto c = parse_hf_config(j.dump());
  ASSERT_FALSE(c.has_value()) << "[8, 12, 12] sums to 32, not head_dim 32 / 2";
  EXPECT_NE(c.status().message().find("mrope_section"), std::string::npos) << c.status().to_string();
  j["text_config"]["hidden_size"] = 64;  // head_dim 64: Glm4vTextConfig rotates all of it, 32 pairs
  j["text_config"]["intermediate_size"] = 64;
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->rope_dims(), 64);
  EXPECT_EQ(c->mrope_section, (std::vector<int>{8, 12, 12}));
}

TEST(Glm4vConfig, BadVisionConfigsAreRefusedByName) {
  const auto base = fixture_json("glm4v", "config.json");
  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {{{"hidden_act", "gelu"}}, "vision_config.hidden_act 'gelu'; supported: silu"},
      {{{"image_size", 18}}, "vision_config.image_size 18"},
      {{{"in_channels", 4}}, "vision_config.in_channels 4"},
      {{{"num_heads", 3}}, "num_heads 3"},
  };
  for (const auto& [patch, message] : bad) {
    auto j = base;
    j["vision_config"].update(patch);
    auto c = parse_hf_config(j.dump());
    ASSERT_FALSE(c.has_value()) << patch.dump();
    EXPECT_NE(c.status().message().find(message), std::string::npos) << c.status().to_string();
  }
  auto j = base;
  j["image_token_id"] = 4000;
  auto c = parse_hf_config(j.dump());
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.status().message().find("image_token_id 4000"), std::string::npos) << c.status().to_string();
}

// Glm4vImageProcessorPil's pixel_values and grids from the fixture's PNGs (rounded, shrunk to the
// budget, and scaled up from a side below the factor).
TEST(Glm4vProcessor, PixelValuesAreTransformers) {
  auto config = model_qwen_image_processor(fixture_dir("glm4v"));
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  EXPECT_TRUE(config->glm);
  const GlmFixture f = read_fixture("glm4v");
  for (size_t k = 0; k < f.images.size(); ++k) {
    auto bytes = read_text_file(fixture_dir("glm4v") + "/image" + std::to_string(k) + ".png");
    ASSERT_TRUE(bytes.has_value());
    auto p = qwen_image_pixels(std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), *config);
    ASSERT_TRUE(p.has_value()) << p.status().to_string();
    EXPECT_EQ(p->grid_h, f.images[k].image.grid_h) << "image " << k;
    EXPECT_EQ(p->grid_w, f.images[k].image.grid_w) << "image " << k;
    EXPECT_LE(relative_error(p->pixels, *f.images[k].image.pixels), 1e-6f) << "image " << k;
  }
  // transformers' glm4v smart_resize on the second and third sources (the third scaled up first).
  EXPECT_EQ(glm4v_smart_resize(6, 10, 8, 2, 128, 3072).value(), std::make_pair(8, 16));
  EXPECT_EQ(glm4v_smart_resize(90, 30, 8, 2, 128, 3072).value(), std::make_pair(64, 16));
}

using Tower = testing::LoadedTower<QwenVision>;

enum class Mutation { none, zero_positions, channel_major_downsample };

std::unique_ptr<Tower> load_tower(const std::string& name, Mutation mutation = Mutation::none) {
  auto c = parse_hf_config(fixture_json(name, "config.json").dump());
  EXPECT_TRUE(c.has_value()) << c.status().to_string();
  if (!c) return nullptr;
  auto rename = [mutation](Tower& t, std::map<std::string, RawTensor> tensors) {
    tensors = qwen_vl_tensors(std::move(tensors));
    if (mutation == Mutation::zero_positions)
      testing::zero_tensor(t, tensors.at("visual.embeddings.position_embedding.weight"));
    else if (mutation == Mutation::channel_major_downsample)
      testing::make_channel_major(t, tensors.at("visual.downsample.weight"), t.v.hidden_size, int64_t{kMerge} * kMerge);
    return tensors;
  };
  return testing::load_fixture_tower<QwenVision>(fixture_dir(name), c->vision, kTextHidden, rename);
}

TEST_P(Glm4v, ImageFeaturesAreTransformersAloneAndTogether) {
  const GlmFixture f = read_fixture(GetParam());
  auto t = load_tower(GetParam());
  ASSERT_NE(t, nullptr);
  const std::vector<StepImage> images = step_images(f);
  std::vector<std::vector<float>> want;
  for (const GlmImage& im : f.images) want.push_back(im.features);
  for (size_t k = 0; k < images.size(); ++k) {
    const float err = testing::expect_features(*t, images, want, {k}, kFeatureTol);
    std::printf("%s image %zu (%d x %d patches): relative error %.3g\n", GetParam(), k, images[k].grid_h,
                images[k].grid_w, err);
  }
  std::vector<size_t> all(images.size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = k;
  testing::expect_features(*t, images, want, all, kFeatureTol);
}

TEST_P(Glm4v, BrokenPositionsOrDownsampleOrderMoveTheFeatures) {
  const GlmFixture f = read_fixture(GetParam());
  for (Mutation m : {Mutation::zero_positions, Mutation::channel_major_downsample}) {
    auto t = load_tower(GetParam(), m);
    ASSERT_NE(t, nullptr);
    const auto got = encode_images(*t, step_images(f));
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_GT(relative_error(got[k], f.images[k].features), 1e-2f) << "mutation " << int(m) << ", image " << k;
  }
}

TEST_P(Glm4v, RotaryPositionsAreTransformersGetRopeIndex) {
  const GlmFixture f = read_fixture(GetParam());
  for (const testing::QwenVlCase& c : f.cases) {
    const size_t n = c.prompt.size();
    for (size_t size : {n, size_t{5}, size_t{7}})
      for (size_t from = 0; from < n; from += size) {
        const size_t to = std::min(n, from + size);
        const std::vector<int32_t> part = mrope_positions(chunk_step(f, c, from, to, 64, 4), kMerge);
        for (size_t k = 0; k < 3; ++k)
          for (size_t j = from; j < to; ++j)
            ASSERT_EQ(part[k * (to - from) + (j - from)], c.position_ids[k][j])
                << "plane " << k << ", row " << j << " of " << n << " in chunks of " << size;
      }
  }
}

// The largest |got - want| over the fixture's rows: got [rows, vocab], want the first ids of each
// row (the fixture keeps N_LOGITS of them); infinite for a short got.
float max_logit_diff(const std::vector<float>& got, int vocab, const std::vector<std::vector<float>>& want) {
  if (got.size() < want.size() * static_cast<size_t>(vocab)) return INFINITY;
  return testing::logit_diff(got, static_cast<size_t>(vocab), want);
}

std::unique_ptr<Model> load_model(Backend& backend, const std::string& name) {
  auto model = Model::load(fixture_dir(name), backend, LoadOptions{.progress = false});
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  return model ? std::move(*model) : nullptr;
}

// Each prompt in one prefill (every position's logits), then the greedy tokens decoded one at a
// time, each decode shifted by the prompt's images (rope_delta); and the prompt in chunks of 5
// and 7 rows, which cut the images: the same logits.
TEST_P(Glm4v, PromptsWithImagesMatchTransformersWholeAndInChunks) {
  const GlmFixture f = read_fixture(GetParam());
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_model(*backend, GetParam());
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->has_vision());
  constexpr int kPageSize = 8, kPages = 8;
  const int vocab = model->config().vocab_size;
  for (const testing::QwenVlCase& c : f.cases) {
    for (size_t size : {c.prompt.size(), size_t{5}, size_t{7}}) {
      auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
      ASSERT_TRUE(kv.has_value());
      std::vector<float> got;
      for (size_t from = 0; from < c.prompt.size(); from += size) {
        const auto part = testing::run_step(*model, *backend, *kv,
                                            chunk_step(f, c, from, std::min(c.prompt.size(), from + size), kPageSize, kPages));
        got.insert(got.end(), part.begin(), part.end());
      }
      const float diff = max_logit_diff(got, vocab, c.logits);
      EXPECT_LE(diff, kLogitTol) << "prompt of " << c.prompt.size() << " in chunks of " << size;
      if (size != c.prompt.size()) continue;
      std::printf("%s prompt of %zu: logits max abs diff %.3g\n", GetParam(), c.prompt.size(), diff);
      int32_t next = testing::argmax(got.data() + (c.prompt.size() - 1) * static_cast<size_t>(vocab), vocab);
      std::vector<int32_t> greedy;
      for (int n_past = static_cast<int>(c.prompt.size()); greedy.size() < c.greedy.size(); ++n_past) {
        greedy.push_back(next);
        StepBatch decode = make_step({{0, {next}, n_past, false}}, kPageSize, kPages);
        decode.rope_delta = {-c.rope_delta};
        const auto row = testing::run_step(*model, *backend, *kv, decode);
        next = testing::argmax(row.data(), vocab);
      }
      EXPECT_EQ(greedy, c.greedy);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Glm4v, ::testing::Values("glm4v", "glm4v_moe"));

}  // namespace
}  // namespace brigade
