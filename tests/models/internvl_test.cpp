// InternVL (InternVLForConditionalGeneration and the remote-code InternVLChatModel layout,
// VisionKind::internvl: InternVision) against transformers (tests/fixtures/internvl, internvl_rms,
// internvl_chat, internvl_internlm2, written by scripts/make_internvl_fixtures.py): each image's
// tiles' features (get_image_features' pooler_output) from GotOcr2ImageProcessorPil's pixel_values,
// alone and several in one call; another feature layer or the final norm dropped, which the
// comparison must catch; the configs of both layouts and bad ones; the PNGs through the tiling
// processor and its tile counts for more sizes; then the language model with images (LlamaModel
// with the tower, as parse_hf_config reads the checkpoint): every position's logits (the first 32
// ids') and the greedy tokens, whole and in chunks that cut the images anywhere. internvl_chat
// holds internvl's weights renamed to the remote layout, and internvl_internlm2 them with the
// language model stored as InternLM2's (wqkv, wo with a zero bias, feed_forward.w1/w3/w2, output),
// so both must give internvl's outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
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
#include "models/image.h"
#include "models/internvl_config.h"
#include "models/internvl_image_processor.h"
#include "models/internvl_vision.h"
#include "models/llama.h"
#include "models/model_config.h"
#include "models/safetensors.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::encode_images;
using testing::fixture_dir;
using testing::fixture_json;
using testing::relative_error;

constexpr int kTextHidden = 32;
constexpr int kTextVocab = 266;
constexpr int32_t kImage = 6, kImgStart = 4, kImgEnd = 5;
constexpr int kSide = 8;             // 32-pixel tiles in 4-pixel patches
constexpr int kTileTokens = 16;      // after the 0.5 pixel shuffle
constexpr float kTol = 1e-5f;        // features, relative to their largest: fp32 both sides
constexpr float kLogitTol = 5e-4f;   // logits through the tower, projector and language model

// The fixture whose expected.json a fixture's outputs must equal (internvl_chat's and
// internvl_internlm2's: internvl's).
std::string reference_of(const std::string& fixture) {
  return fixture == "internvl_chat" || fixture == "internvl_internlm2" ? "internvl" : fixture;
}

// The processor's tiles (internvl's pixel_values.f32) as StepImages of (tiles * 8) x 8 patches.
std::vector<StepImage> read_pixels() {
  const nlohmann::json j = fixture_json("internvl", "expected.json");
  const std::string raw = read_text_file(fixture_dir("internvl") + "/pixel_values.f32").value();
  const size_t tile = 3 * 32 * 32;
  std::vector<StepImage> out;
  size_t at = 0;
  for (const auto& im : j.at("images")) {
    const int n = im.at("n_tiles").get<int>();
    auto px = std::make_shared<std::vector<float>>(tile * static_cast<size_t>(n));
    EXPECT_LE((at + px->size()) * sizeof(float), raw.size());
    std::memcpy(px->data(), raw.data() + at * sizeof(float), px->size() * sizeof(float));
    at += px->size();
    out.push_back({0, std::move(px), n * kSide, kSide});
  }
  EXPECT_EQ(at * sizeof(float), raw.size());
  return out;
}

std::vector<std::vector<float>> read_features(const std::string& fixture) {
  return testing::read_image_features(fixture_json(fixture, "expected.json"));
}

using Tower = testing::LoadedTower<InternVision>;

// The fixture's tower under internvl_tensors' names; `mutate` edits the config read first.
std::unique_ptr<Tower> load_tower(const std::string& fixture, const std::function<void(VisionConfig&)>& mutate = {}) {
  return testing::load_fixture_tower<InternVision>(
      fixture_dir(fixture), read_internvl_vision(fixture_json(fixture, "config.json"), kTextVocab), kTextHidden,
      [](Tower&, std::map<std::string, RawTensor> m) { return internvl_tensors(std::move(m)); }, mutate);
}

class InternVLVision : public ::testing::TestWithParam<std::string> {};

// internvl: LayerNorm blocks with q/k/v biases, the last layer; internvl_rms: RMSNorm blocks with
// qk norm, hidden_states[-2]; internvl_chat: internvl's weights under the remote layout's names
// (q|k|v fused, ls1 / ls2, mlp1.*).
TEST_P(InternVLVision, FeaturesMatchTransformersAloneAndTogether) {
  const auto pixels = read_pixels();
  const auto want = read_features(reference_of(GetParam()));
  ASSERT_EQ(pixels.size(), 3u);
  auto t = load_tower(GetParam());
  ASSERT_NE(t, nullptr);
  const float worst = testing::expect_features_alone_and_together(*t, pixels, want, {2, 0, 1}, kTol);
  std::printf("[ measured ] %s: largest relative feature difference from transformers: %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, InternVLVision, ::testing::Values("internvl", "internvl_rms", "internvl_chat"));

// Reading another hidden state, or internvl_rms's last state without the final LayerNorm that
// use_mean_pooling false puts on it, moves the features far beyond tolerance.
TEST(InternVLVisionMutation, AnotherFeatureLayerMovesTheFeatures) {
  const auto pixels = read_pixels();
  const auto want = read_features("internvl_rms");
  auto last = load_tower("internvl_rms", [](VisionConfig& v) { v.feature_layers = {3}; });
  ASSERT_NE(last, nullptr);
  EXPECT_GT(relative_error(encode_images(*last, {pixels[1]}).at(0), want[1]), 1e-3f);
  auto normed = load_tower("internvl_rms", [](VisionConfig& v) { v.final_norm = true; });
  ASSERT_NE(normed, nullptr);
  EXPECT_GT(relative_error(encode_images(*normed, {pixels[1]}).at(0), want[1]), 1e-3f);
  auto wrong_grid = load_tower("internvl");
  ASSERT_NE(wrong_grid, nullptr);
  StepImage bad = pixels[0];
  bad.grid_w = kSide * 3, bad.grid_h = kSide;  // the tiles side by side: refused
  auto buf = wrong_grid->backend->allocate(size_t{48} * kTextHidden * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  const Status st = wrong_grid->tower.encode({&bad, 1}, buf->view(DType::f32, {48, kTextHidden}));
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("column of tiles"), std::string::npos) << st.message();
}

TEST(InternVLConfig, ReadsBothLayouts) {
  auto v = read_internvl_vision(fixture_json("internvl", "config.json"), kTextVocab);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::internvl);
  EXPECT_EQ(v->merge, 2);
  EXPECT_EQ(v->patches_per_side(), kSide);
  EXPECT_EQ(v->image_tokens(3 * kSide, kSide), 3 * kTileTokens);
  EXPECT_EQ(v->feature_layers, std::vector<int>{2});
  EXPECT_TRUE(v->qkv_bias);
  EXPECT_FALSE(v->rms_norm || v->qk_norm || v->final_norm);
  EXPECT_EQ(v->image_token, kImage);
  auto r = read_internvl_vision(fixture_json("internvl_rms", "config.json"), kTextVocab);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_TRUE(r->rms_norm && r->qk_norm);
  EXPECT_FALSE(r->qkv_bias);
  EXPECT_FALSE(r->final_norm);  // hidden_states[-2] skips the final norm
  EXPECT_EQ(r->feature_layers, std::vector<int>{2});
  auto chat = read_internvl_vision(fixture_json("internvl_chat", "config.json"), kTextVocab);
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  EXPECT_EQ(chat->hidden_size, v->hidden_size);
  EXPECT_EQ(chat->feature_layers, v->feature_layers);
  EXPECT_EQ(chat->qkv_bias, v->qkv_bias);
  EXPECT_EQ(chat->image_token, kImage);
  for (const auto& [fixture, arch] : {std::pair{"internvl", "qwen2"}, {"internvl_rms", "qwen3"}, {"internvl_chat", "qwen2"},
                                       {"internvl_internlm2", "internlm2"}}) {
    auto c = parse_hf_config(read_text_file(fixture_dir(fixture) + "/config.json").value());
    ASSERT_TRUE(c.has_value()) << fixture << ": " << c.status().to_string();
    EXPECT_EQ(c->arch, arch) << fixture;
    EXPECT_EQ(c->vision.kind, VisionKind::internvl) << fixture;
    EXPECT_EQ(c->hidden_size, kTextHidden) << fixture;
  }
  // InternVLConfig's defaults: InternVL3-1B's tower (448-pixel tiles, 14-pixel patches, 256
  // tokens a tile) and image token.
  auto d = read_internvl_vision(nlohmann::json{{"model_type", "internvl"}}, 151674);
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->image_tokens(32, 32), 256);
  EXPECT_EQ(d->image_token, 151667);
}

TEST(InternVLConfig, RefusesWhatItCannotRunByName) {
  const nlohmann::json base = fixture_json("internvl", "config.json"), chat = fixture_json("internvl_chat", "config.json");
  testing::expect_refused_by_name(base, {
      {[](nlohmann::json& j) { j["vision_config"]["norm_type"] = "batch_norm"; }, "norm_type"},
      {[](nlohmann::json& j) { j["vision_config"]["hidden_act"] = "relu"; }, "hidden_act"},
      {[](nlohmann::json& j) { j["vision_config"]["image_size"] = nlohmann::json::array({32, 64}); }, "image_size"},
      {[](nlohmann::json& j) { j["vision_config"]["use_mask_token"] = true; }, "use_mask_token"},
      {[](nlohmann::json& j) { j["downsample_ratio"] = 0.3; }, "downsample_ratio"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = 5; }, "vision_feature_layer"},
      {[](nlohmann::json& j) { j["vision_feature_select_strategy"] = "full"; }, "vision_feature_select_strategy"},
      {[](nlohmann::json& j) { j["image_token_id"] = 9999; }, "image_token_id"},
  }, [](const nlohmann::json& j) { return read_internvl_vision(j, kTextVocab); });
  nlohmann::json v1 = chat;
  v1["ps_version"] = "v1";
  auto refused = read_internvl_vision(v1, kTextVocab);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("ps_version"), std::string::npos) << refused.status().message();
  nlohmann::json phi3 = chat;  // InternVL2-4B's language model
  phi3["llm_config"]["architectures"] = {"Phi3ForCausalLM"};
  auto text = internvl_text_config(phi3);
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.status().message().find("Phi3ForCausalLM"), std::string::npos) << text.status().message();
  nlohmann::json gemma = base;
  gemma["text_config"]["model_type"] = "gemma";
  text = internvl_text_config(gemma);
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.status().message().find("text_config.model_type"), std::string::npos) << text.status().message();
}

// The PNGs through the processor (the fixture's preprocessor_config.json) give
// GotOcr2ImageProcessorPil's tiles (crop_to_patches as InternVLProcessor passes it).
TEST(InternVLImageProcessor, PngsGiveTransformersTiles) {
  auto config = model_internvl_image_processor(fixture_dir("internvl"), 32);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  EXPECT_EQ(config->max_tiles, 4);
  const auto want = read_pixels();
  float worst = 0.0f;
  for (size_t k = 0; k < want.size(); ++k) {
    const std::string png = read_text_file(fixture_dir("internvl") + "/image" + std::to_string(k) + ".png").value();
    auto got = internvl_image_pixels({reinterpret_cast<const uint8_t*>(png.data()), png.size()}, *config, 4);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ(got->grid_h, want[k].grid_h) << "image " << k;
    EXPECT_EQ(got->grid_w, kSide);
    ASSERT_EQ(got->pixels.size(), want[k].pixels->size()) << "image " << k;
    for (size_t i = 0; i < got->pixels.size(); ++i) worst = std::max(worst, std::fabs(got->pixels[i] - (*want[k].pixels)[i]));
  }
  EXPECT_LE(worst, 1e-6f);
  std::printf("[ measured ] largest |pixel_values difference| from GotOcr2ImageProcessorPil: %.3g\n", worst);
}

TEST(InternVLImageProcessor, TileCountsMatchTransformers) {
  const nlohmann::json j = fixture_json("internvl", "expected.json");
  ASSERT_FALSE(j.at("tiling").empty());
  for (const auto& t : j.at("tiling")) {
    InternVLImageProcessorConfig c;
    c.tile = t.at("tile").get<int>();
    c.min_tiles = t.at("min").get<int>();
    c.max_tiles = t.at("max").get<int>();
    const auto hw = t.at("hw").get<std::vector<int>>();
    EXPECT_EQ(internvl_n_tiles(hw[0], hw[1], c), t.at("n_tiles").get<int>()) << hw[0] << "x" << hw[1] << " in tiles of " << c.tile;
  }
}

class InternVLModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::vector<StepImage> pixels = read_pixels();
    ASSERT_EQ(pixels.size(), 3u);
    prompts_.load({.fixture = GetParam(),
                   .reference = reference_of(GetParam()),
                   .kind = VisionKind::internvl,
                   .markers = {.image = kImage, .begin = kImgStart, .end = kImgEnd}},
                  std::move(pixels));
    ASSERT_TRUE(prompts_.loaded());
  }
  testing::ImagePrompts prompts_;
};

// Every prompt position's logits in one prefill, then cached greedy decode steps.
TEST_P(InternVLModel, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const float worst = prompts_.expect_prompts_match(kLogitTol);
  std::printf("[ measured ] %s: largest |logit difference| from transformers: %.3g\n", GetParam().c_str(), worst);
}

// Chunks of 5 and 7 rows cut the images anywhere (inside tiles and between them): each chunk
// scatters its rows of the image's cached features.
TEST_P(InternVLModel, ChunksCuttingImagesGiveTheSameLogits) {
  const float worst = prompts_.expect_chunks_match(kLogitTol, {5, 7});
  std::printf("[ measured ] %s: largest |logit difference| in chunks of 5 and 7: %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, InternVLModel,
                         ::testing::Values("internvl", "internvl_rms", "internvl_chat", "internvl_internlm2"));

}  // namespace
}  // namespace brigade
