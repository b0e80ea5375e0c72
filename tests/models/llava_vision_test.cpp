// LLaVA (LlavaForConditionalGeneration, VisionKind::llava: ClipVision) against transformers
// (tests/fixtures/llava, llava_full, llava_siglip, written by scripts/make_llava_fixtures.py):
// each image's features (get_image_features' pooler_output) from CLIPImageProcessorPil's
// pixel_values, alone and several in one call; a feature layer moved, or the class row kept where
// "default" drops it, that the comparison must catch; read_llava_vision on the fixtures' configs
// and on bad ones; the PNGs through the CLIP processor; then the language model with images
// (LlamaModel with the tower, as parse_hf_config reads the checkpoint): every position's logits
// (the first 32 ids') and the greedy tokens, whole and in chunks that cut the images anywhere.
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
#include "models/clip_vision.h"
#include "models/gemma_config.h"
#include "models/image_processor.h"
#include "models/llama.h"
#include "models/llava_config.h"
#include "models/model_config.h"
#include "models/safetensors.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::encode_images;
using testing::fixture_dir;
using testing::fixture_json;
using testing::relative_error;

constexpr int kTextHidden = 48;
constexpr int kTextVocab = 261;
constexpr int32_t kImage = 3;
constexpr float kTol = 1e-5f;       // features, relative to their largest: fp32 both sides
constexpr float kLogitTol = 5e-4f;  // logits through the tower, projector and language model

// The processor's pixel_values (the same images and processor for every fixture: llava's) as
// StepImages of the tower's 7 x 7 grid.
std::vector<StepImage> read_pixels() {
  std::vector<StepImage> out;
  const nlohmann::json j = fixture_json("llava", "expected.json");  // the loop below reads into it
  for (const auto& im : j.at("images"))
    out.push_back({0, std::make_shared<std::vector<float>>(testing::flatten_floats(im.at("pixel_values"))), 7, 7});
  return out;
}

std::vector<std::vector<float>> read_features(const std::string& fixture) {
  return testing::read_image_features(fixture_json(fixture, "expected.json"));
}

using Tower = testing::LoadedTower<ClipVision>;

// The fixture's tower under the names the checkpoint gives it (gemma3_tensors); `mutate` edits
// the config read first.
std::unique_ptr<Tower> load_tower(const std::string& fixture, const std::function<void(VisionConfig&)>& mutate = {}) {
  return testing::load_fixture_tower<ClipVision>(
      fixture_dir(fixture), read_llava_vision(fixture_json(fixture, "config.json"), kTextVocab), kTextHidden,
      [](Tower&, std::map<std::string, RawTensor> m) { return gemma3_tensors(std::move(m)); }, mutate);
}

class LlavaVision : public ::testing::TestWithParam<std::string> {};

// llava: CLIP at hidden_states[-2] without the class row; llava_full: CLIP's embeddings and last
// layer concatenated, class row kept; llava_siglip: SigLIP's last layer less its first patch.
TEST_P(LlavaVision, FeaturesMatchTransformersAloneAndTogether) {
  const auto pixels = read_pixels();
  const auto want = read_features(GetParam());
  ASSERT_EQ(pixels.size(), 3u);
  auto t = load_tower(GetParam());
  ASSERT_NE(t, nullptr);
  const float worst = testing::expect_features_alone_and_together(*t, pixels, want, {2, 0, 1}, kTol);
  std::printf("[ measured ] %s: largest relative feature difference from transformers: %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlavaVision, ::testing::Values("llava", "llava_full", "llava_siglip"));

// Reading another hidden state (the last layer's instead of the one before) or keeping the class
// row "default" drops moves the features far beyond tolerance.
TEST(LlavaVisionMutation, AnotherFeatureLayerOrTheClassRowMovesTheFeatures) {
  const auto pixels = read_pixels();
  const auto want = read_features("llava");
  auto last = load_tower("llava", [](VisionConfig& v) { v.feature_layers = {3}; });
  ASSERT_NE(last, nullptr);
  EXPECT_GT(relative_error(encode_images(*last, {pixels[0]}).at(0), want[0]), 100 * kTol);
  auto cls = load_tower("llava", [](VisionConfig& v) { v.extra_tokens = 1; });
  ASSERT_NE(cls, nullptr);
  std::vector<float> kept = encode_images(*cls, {pixels[0]}).at(0);
  ASSERT_EQ(kept.size(), want[0].size() + kTextHidden);
  EXPECT_GT(relative_error(std::vector<float>(kept.begin(), kept.end() - kTextHidden), want[0]), 100 * kTol);
}

TEST(LlavaVisionConfig, ReadsTheFixturesConfigs) {
  auto v = read_llava_vision(fixture_json("llava", "config.json"), kTextVocab);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::llava);
  EXPECT_TRUE(v->class_token);
  EXPECT_EQ(v->feature_layers, std::vector<int>{2});
  EXPECT_EQ(v->extra_tokens, 0);
  EXPECT_EQ(v->image_tokens(7, 7), 49);
  EXPECT_EQ(v->patch_width(), 48);
  EXPECT_EQ(v->hidden_act, "quick_gelu");
  EXPECT_TRUE(v->projector_bias);
  v = read_llava_vision(fixture_json("llava_full", "config.json"), kTextVocab);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->feature_layers, (std::vector<int>{0, 3}));
  EXPECT_EQ(v->image_tokens(7, 7), 50);
  EXPECT_EQ(v->projector_act, "gelu_pytorch_tanh");
  v = read_llava_vision(fixture_json("llava_siglip", "config.json"), kTextVocab);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_FALSE(v->class_token);
  EXPECT_EQ(v->image_tokens(7, 7), 48);
  EXPECT_FLOAT_EQ(v->eps, 1e-6f);
  // LlavaConfig's defaults: llava-1.5's CLIP-L/14 at 336 pixels, hidden_states[-2], 576 tokens.
  v = read_llava_vision(nlohmann::json::object(), 32064);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->image_size, 336);
  EXPECT_EQ(v->patch_size, 14);
  EXPECT_EQ(v->feature_layers, std::vector<int>{23});
  EXPECT_EQ(v->image_tokens(24, 24), 576);
  EXPECT_EQ(v->image_token, 32000);
}

TEST(LlavaVisionConfig, ParseHfConfigGivesEachLanguageModelItsTower) {
  for (const auto& [fixture, arch] : {std::pair{"llava", "llama"}, {"llava_full", "qwen2"}, {"llava_siglip", "llama"}}) {  // mistral runs as llama
    auto c = parse_hf_config(fixture_json(fixture, "config.json").dump());
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    EXPECT_EQ(c->arch, arch);
    EXPECT_TRUE(c->multimodal_text);
    EXPECT_EQ(c->vocab_size, kTextVocab);
    EXPECT_EQ(c->hidden_size, kTextHidden);
    EXPECT_EQ(c->vision.kind, VisionKind::llava);
    EXPECT_TRUE(c->vision.dynamic());
  }
  // llava-1.5-7b-hf's text_config gives only a few fields: LlamaConfig's defaults fill the rest.
  nlohmann::json j = {{"architectures", {"LlavaForConditionalGeneration"}}, {"model_type", "llava"},
                      {"text_config", {{"model_type", "llama"}, {"vocab_size", 32064}, {"max_position_embeddings", 4096},
                                       {"rms_norm_eps", 1e-5}}}};
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->n_layers, 32);
  EXPECT_EQ(c->vision.image_tokens(24, 24), 576);
}

TEST(LlavaVisionConfig, RefusesWhatItCannotRunByName) {
  const nlohmann::json base = fixture_json("llava", "config.json");
  testing::expect_refused_by_name(base, {
      {[](nlohmann::json& j) { j["vision_config"]["hidden_act"] = "relu"; }, "vision_config.hidden_act 'relu'"},
      {[](nlohmann::json& j) { j["vision_config"]["model_type"] = "pixtral"; }, "vision_config.model_type 'pixtral'"},
      {[](nlohmann::json& j) { j["vision_config"]["num_channels"] = 4; }, "vision_config.num_channels 4"},
      {[](nlohmann::json& j) { j["vision_config"]["image_size"] = 3; }, "image_size 3 is smaller than one patch of 4"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = -5; }, "vision_feature_layer -5"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = {0, 4}; }, "vision_feature_layer 4"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = "last"; }, "vision_feature_layer must be"},
      {[](nlohmann::json& j) { j["vision_feature_select_strategy"] = "cls"; }, "vision_feature_select_strategy 'cls'"},
      {[](nlohmann::json& j) { j["projector_hidden_act"] = "silu"; }, "projector_hidden_act 'silu'"},
      {[](nlohmann::json& j) { j["image_token_index"] = kTextVocab; }, "image_token_index 261"},
      {[](nlohmann::json& j) { j["vision_config"] = 3; }, "vision_config is not an object"},
  }, [](const nlohmann::json& j) { return read_llava_vision(j, kTextVocab); });
  nlohmann::json j = base;
  j["text_config"]["model_type"] = "gemma";
  const auto c = parse_hf_config(j.dump());
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.status().message().find("text_config.model_type 'gemma'"), std::string::npos) << c.status().message();
}

// The fixture's PNGs through CLIPImageProcessor (shortest edge 28, bicubic, center crop 28x28)
// give transformers' pixel_values: 40x60 and 61x33 images are resized and cropped, 28x28 kept.
TEST(LlavaImageProcessor, PngsGiveTransformersPixelValues) {
  auto config = model_image_processor(fixture_dir("llava"), 28);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  EXPECT_EQ(config->shortest_edge, 28);
  EXPECT_TRUE(config->do_center_crop);
  const auto want = read_pixels();
  for (size_t k = 0; k < want.size(); ++k) {
    auto bytes = read_text_file(fixture_dir("llava") + "/image" + std::to_string(k) + ".png");
    ASSERT_TRUE(bytes.has_value());
    auto px = image_pixels(std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), *config);
    ASSERT_TRUE(px.has_value()) << px.status().to_string();
    ASSERT_EQ(px->size(), want[k].pixels->size());
    float worst = 0.0f;
    for (size_t i = 0; i < px->size(); ++i) worst = std::max(worst, std::fabs((*px)[i] - (*want[k].pixels)[i]));
    EXPECT_LE(worst, 1e-6f) << "image " << k;
  }
  // A processor whose crop is not the tower's size is refused at load, naming both.
  nlohmann::json j = fixture_json("llava", "preprocessor_config.json");
  j["crop_size"] = {{"height", 24}, {"width", 24}};
  auto parsed = parse_image_processor_config(j);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->output_size(60, 40), (std::array<int, 2>{24, 24}));
  EXPECT_EQ(parsed->resized_size(60, 40), (std::array<int, 2>{28, 42}));
}

// ---- The language model with images ----

class LlavaModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::vector<StepImage> pixels = read_pixels();
    ASSERT_EQ(pixels.size(), 3u);
    prompts_.load({.fixture = GetParam(), .kind = VisionKind::llava, .markers = {.image = kImage}}, std::move(pixels));
    ASSERT_TRUE(prompts_.loaded());
  }
  testing::ImagePrompts prompts_;
};

TEST_P(LlavaModel, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const float worst = prompts_.expect_prompts_match(kLogitTol);
  std::printf("[ measured ] %s: largest |logit difference| from transformers: %.3g\n", GetParam().c_str(), worst);
}

// Chunks of 5 and 7 rows cut the images anywhere: each chunk scatters its rows of the image's
// cached features; every position's logits are transformers' as in one prefill.
TEST_P(LlavaModel, ChunksCuttingImagesGiveTheSameLogits) { prompts_.expect_chunks_match(kLogitTol, {5, 7}); }

INSTANTIATE_TEST_SUITE_P(Fixtures, LlavaModel, ::testing::Values("llava", "llava_full", "llava_siglip"));

}  // namespace
}  // namespace brigade
