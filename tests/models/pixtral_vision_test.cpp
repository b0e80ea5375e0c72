// Mistral 3's Pixtral vision tower and projector (QwenVision, VisionKind::pixtral) against
// transformers (tests/fixtures/mistral3_vision, written by scripts/make_pixtral_fixtures.py):
// each image's features (get_image_features' pooler_output) from the processor's pixel_values,
// images alone and several in one call; a transposed grid and a channel-major merging_layer that
// the comparison must catch; read_pixtral_vision on the fixture's config and on bad ones. Then
// the language model with images (LlamaModel with the tower, as parse_hf_config reads the
// checkpoint): every position's logits (the first 64 ids') and the greedy tokens of
// prompts holding images' [IMG] / [IMG_BREAK] / [IMG_END] layouts, whole and in chunks that cut
// the images anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
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
#include "models/gemma_config.h"
#include "models/llama.h"
#include "models/model_config.h"
#include "models/qwen_image_processor.h"
#include "models/qwen_vision.h"
#include "models/safetensors.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::encode_images;
using testing::fixture_dir;
using testing::fixture_json;
using testing::relative_error;

constexpr const char* kFixture = "mistral3_vision";
constexpr int kTextHidden = 48;
constexpr int kTextVocab = 276;
constexpr float kTextEps = 1e-5f;
// fp32 both sides, sums in other orders: the largest difference over an image's features,
// relative to their largest magnitude.
constexpr float kTol = 1e-5f;

// The fixture's images as the tower takes them, and transformers' features of each ([tokens * 48]).
struct FixtureImages {
  std::vector<StepImage> pixels;
  std::vector<std::vector<float>> features;
};

// pixel_values [3, h, w] patchified as the Pixtral processor hands them to the tower: merge
// blocks of 2x2 patches of 4x4 pixels, patch rows [c][y][x].
FixtureImages read_images() {
  const auto j = fixture_json(kFixture, "expected.json");
  QwenImageProcessorConfig rows;
  rows.patch_size = j.at("patch_size").get<int>();
  rows.merge_size = j.at("merge").get<int>();
  rows.temporal_patch_size = 1;
  FixtureImages out;
  for (const auto& im : j.at("images")) {
    const auto hw = im.at("image_sizes").get<std::vector<int>>();
    PatchedImage p = patchify_qwen(testing::flatten_floats(im.at("pixel_values")), hw.at(0), hw.at(1), rows);
    out.pixels.push_back({0, std::make_shared<std::vector<float>>(std::move(p.pixels)), p.grid_h, p.grid_w});
  }
  out.features = testing::read_image_features(j);
  return out;
}

using Tower = testing::LoadedTower<QwenVision>;

// The fixture's tower under the names the checkpoint gives a Mistral3ForConditionalGeneration
// (gemma3_tensors). channel_major_merger: merging_layer's columns rearranged so that the
// (correct) patch-major read sees them channel-major, i.e. as if unfold's order were ignored.
std::unique_ptr<Tower> load_tower(bool channel_major_merger = false) {
  auto rename = [channel_major_merger](Tower& t, std::map<std::string, RawTensor> tensors) {
    tensors = gemma3_tensors(std::move(tensors));
    if (channel_major_merger)
      testing::make_channel_major(t, tensors.at("multi_modal_projector.patch_merger.merging_layer.weight"),
                                  t.v.hidden_size, int64_t{t.v.merge} * t.v.merge);
    return tensors;
  };
  return testing::load_fixture_tower<QwenVision>(
      fixture_dir(kFixture), read_pixtral_vision(fixture_json(kFixture, "config.json"), kTextVocab, kTextHidden, kTextEps),
      kTextHidden, rename);
}

class PixtralVision : public ::testing::Test {
 protected:
  void SetUp() override {
    images_ = read_images();
    ASSERT_EQ(images_.pixels.size(), 3u);
    t_ = load_tower();
    ASSERT_NE(t_, nullptr);
  }
  void expect_features(const std::vector<size_t>& which) {
    max_error_ = std::max(max_error_, testing::expect_features(*t_, images_.pixels, images_.features, which, kTol));
  }
  FixtureImages images_;
  std::unique_ptr<Tower> t_;
  float max_error_ = 0.0f;
};

// 8x12, 4x2 and 12x4 patches (32x48, 16x8 and 48x16 pixels after the processor's resize).
TEST_F(PixtralVision, EachImageAloneGivesTransformersFeatures) {
  for (size_t i = 0; i < images_.pixels.size(); ++i) expect_features({i});
  std::printf("[ measured ] largest relative difference from transformers: %.3g\n", max_error_);
}

// Several images in one call (transformers' block-diagonal mask): each image's rows see only
// its own, so each gets the features it gets alone.
TEST_F(PixtralVision, SeveralImagesInOneCallGiveEachImagesFeatures) { expect_features({2, 0, 1, 0}); }

// Swapping the rotary's row and column (the same pixels read as a transposed grid) moves the
// features far beyond tolerance.
TEST_F(PixtralVision, ATransposedGridMovesTheFeaturesBeyondTolerance) {
  for (size_t i : {0, 1, 2}) {
    StepImage swapped = images_.pixels[i];
    std::swap(swapped.grid_h, swapped.grid_w);
    EXPECT_GT(relative_error(encode_images(*t_, {swapped}).at(0), images_.features[i]), 100 * kTol) << "image " << i;
  }
}

// merging_layer read as if its input were patch-major (ignoring unfold's channel-major order)
// moves every image's features far beyond tolerance.
TEST(PixtralVisionMutation, AChannelMajorMergerReadMovesTheFeatures) {
  const auto images = read_images();
  auto t = load_tower(/*channel_major_merger=*/true);
  ASSERT_NE(t, nullptr);
  for (size_t i = 0; i < images.pixels.size(); ++i)
    EXPECT_GT(relative_error(encode_images(*t, {images.pixels[i]}).at(0), images.features[i]), 100 * kTol) << "image " << i;
}

TEST(PixtralVisionConfig, ReadsTheFixturesConfig) {
  const auto v = read_pixtral_vision(fixture_json(kFixture, "config.json"), kTextVocab, kTextHidden, kTextEps);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::pixtral);
  EXPECT_TRUE(v->dynamic());
  EXPECT_EQ(v->n_layers, 2);
  EXPECT_EQ(v->hidden_size, 32);
  EXPECT_EQ(v->intermediate_size, 48);
  EXPECT_EQ(v->n_heads, 2);
  EXPECT_EQ(v->patch_size, 4);
  EXPECT_EQ(v->merge, 2);
  EXPECT_EQ(v->patch_width(), 48);
  EXPECT_EQ(v->out_hidden_size, kTextHidden);
  EXPECT_EQ(v->image_token, 10);
  EXPECT_FLOAT_EQ(v->eps, 1e-5f);
  EXPECT_FLOAT_EQ(v->projector_eps, kTextEps);
  EXPECT_FALSE(v->projector_bias);
  EXPECT_EQ(v->image_features(8, 12), 24);
  EXPECT_EQ(v->image_tokens(8, 12), 28);  // a break after each of the 4 rows of 6, the last the end
}

// parse_hf_config gives Mistral3ForConditionalGeneration its tower; a tower refused by field leaves
// the language model loading as text, vision_off saying why (the mistral3 / ministral3 text
// fixtures' towers say gelu), and Mistral Small 4's MLA language model takes no images.
TEST(PixtralVisionConfig, ParseHfConfigGivesTheTowerOrSaysWhyNot) {
  nlohmann::json j = fixture_json(kFixture, "config.json");
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_TRUE(c->multimodal_text);
  EXPECT_TRUE(c->vision.present());
  EXPECT_EQ(c->vision.kind, VisionKind::pixtral);
  EXPECT_EQ(c->vision.out_hidden_size, kTextHidden);
  EXPECT_EQ(c->vision_off, "");
  j["vision_config"]["hidden_act"] = "gelu";
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_FALSE(c->vision.present());
  EXPECT_EQ(c->vocab_size, kTextVocab);
  EXPECT_NE(c->vision_off.find("vision_config.hidden_act 'gelu'"), std::string::npos) << c->vision_off;
}

// Refused by field: each mutation of the fixture's config names what it changed.
TEST(PixtralVisionConfig, RefusesWhatTheTowerCannotRunByName) {
  const nlohmann::json base = fixture_json(kFixture, "config.json");
  testing::expect_refused_by_name(base, {
      {[](nlohmann::json& j) { j["vision_config"]["hidden_act"] = "gelu"; }, "vision_config.hidden_act 'gelu'"},
      {[](nlohmann::json& j) { j["vision_config"].erase("hidden_act"); }, "vision_config.hidden_act 'gelu'"},
      {[](nlohmann::json& j) { j["vision_config"]["num_channels"] = 4; }, "vision_config.num_channels 4"},
      {[](nlohmann::json& j) { j["vision_config"]["head_dim"] = 8; }, "vision_config.head_dim 8"},
      {[](nlohmann::json& j) {
         j["vision_config"]["num_attention_heads"] = 16;  // head_dim 2
         j["vision_config"].erase("head_dim");
       },
       "multiple of 4"},
      {[](nlohmann::json& j) { j["vision_config"]["rope_parameters"] = {{"rope_type", "yarn"}}; },
       "rope_parameters.rope_type 'yarn'"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = -2; }, "vision_feature_layer -2"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = {-1, -2}; }, "vision_feature_layer [-1,-2]"},
      {[](nlohmann::json& j) { j["projector_hidden_act"] = "silu"; }, "projector_hidden_act 'silu'"},
      {[](nlohmann::json& j) { j["image_token_index"] = kTextVocab; }, "image_token_index 276"},
      {[](nlohmann::json& j) { j["spatial_merge_size"] = 0; }, "spatial_merge_size"},
      {[](nlohmann::json& j) { j["vision_config"] = 3; }, "vision_config is not an object"},
  }, [](const nlohmann::json& j) { return read_pixtral_vision(j, kTextVocab, kTextHidden, kTextEps); });
}

// ---- The language model with images ----

constexpr int32_t kImage = 10;
constexpr int32_t kImageBreak = 12;
// Logits pass through the tower, the projector and the language model: fp32 both sides.
constexpr float kLogitTol = 5e-4f;

class Mistral3Vision : public ::testing::Test {
 protected:
  // The fixture's Mistral3ForConditionalGeneration, its language model with the Pixtral tower; an
  // image's layout starts at an [IMG] after neither [IMG] nor [IMG_BREAK].
  void SetUp() override {
    prompts_.load({.fixture = kFixture,
                   .kind = VisionKind::pixtral,
                   .markers = {.image = kImage, .brk = kImageBreak},
                   .max_batch_tokens = 128,
                   .pages = 4},
                  read_images().pixels);
    ASSERT_TRUE(prompts_.loaded());
    ASSERT_EQ(prompts_.cases().size(), 2u);
  }
  testing::ImagePrompts prompts_;
};

// Each image's layout in the prompts is the one read_pixtral_vision's token ids give (mistral-
// common's, checked by the image processor's tests).
TEST_F(Mistral3Vision, ThePromptsHoldEachImagesLayout) {
  const VisionConfig& v = prompts_.model().config().vision;
  for (const testing::ImageCase& c : prompts_.cases())
    for (const StepImage& im : prompts_.images_of(c)) {
      const int t = v.image_tokens(im.grid_h, im.grid_w);
      for (int j = 0; j < t; ++j) EXPECT_EQ(c.prompt.at(static_cast<size_t>(im.row + j)), v.token_at(j, im.grid_h, im.grid_w));
    }
}

// Each prompt in one prefill: every position's logits, then transformers' greedy continuation
// decoded a token at a time.
TEST_F(Mistral3Vision, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const float worst = prompts_.expect_prompts_match(kLogitTol);
  std::printf("[ measured ] largest |logit difference| from transformers: %.3g\n", worst);
}

// Chunks of 5 and 7 rows cut the images anywhere (inside a row of [IMG], at a break): each chunk
// scatters its rows' features, gathered from the image's cached encoding, the breaks keep their
// embeddings; every position's logits are transformers' as in one prefill.
TEST_F(Mistral3Vision, ChunksCuttingImagesGiveTheSameLogits) { prompts_.expect_chunks_match(kLogitTol, {5, 7}); }

// A step whose image layout holds [IMG] where its break belongs is refused, naming the row.
TEST_F(Mistral3Vision, ABreakOutOfPlaceIsRefused) {
  const testing::ImageCase& c = prompts_.cases().at(1);
  Model& model = prompts_.model();
  std::vector<int32_t> prompt = c.prompt;
  const std::vector<StepImage> ims = prompts_.images_of(c);
  ASSERT_EQ(ims.size(), 1u);
  const size_t brk = static_cast<size_t>(ims[0].row) + 6;  // after the first row of 6 tokens
  ASSERT_EQ(prompt.at(brk), kImageBreak);
  prompt[brk] = kImage;
  auto kv = KvCache::allocate(prompts_.backend(), model.kv_layout(prompts_.pages(), prompts_.page_size(), DType::f32));
  ASSERT_TRUE(kv.has_value());
  StepBatch step = testing::make_step({{0, prompt, 0, true}}, prompts_.page_size(), prompts_.pages());
  step.images = ims;
  const auto vocab = static_cast<int64_t>(prompts_.vocab());
  auto buf = prompts_.backend().allocate(step.logit_rows.size() * prompts_.vocab() * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  const Status st = model.forward(step, *kv, buf->view(DType::f32, {static_cast<int64_t>(step.logit_rows.size()), vocab}));
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("row " + std::to_string(brk) + " of the image"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("the break or end of its layout"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace brigade
