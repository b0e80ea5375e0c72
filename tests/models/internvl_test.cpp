// InternVL (InternVLForConditionalGeneration and the remote-code InternVLChatModel layout,
// VisionKind::internvl: InternVision) against transformers (tests/fixtures/internvl,
// internvl_rms, internvl_chat, written by scripts/make_internvl_fixtures.py): each image's tiles'
// features (get_image_features' pooler_output) from GotOcr2ImageProcessorPil's pixel_values,
// alone and several in one call; another feature layer or the final norm dropped, which the
// comparison must catch; the configs of both layouts and bad ones; the PNGs through the tiling
// processor and its tile counts for more sizes; then the language model with images (LlamaModel
// with the tower, as parse_hf_config reads the checkpoint): every position's logits (the first 32
// ids') and the greedy tokens, whole and in chunks that cut the images anywhere. internvl_chat
// holds internvl's weights renamed to the remote layout, so it must give internvl's outputs.
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

using testing::fixture_dir;
using testing::relative_error;

constexpr int kTextHidden = 32;
constexpr int kTextVocab = 266;
constexpr int32_t kImage = 6, kImgStart = 4, kImgEnd = 5;
constexpr int kSide = 8;             // 32-pixel tiles in 4-pixel patches
constexpr int kTileTokens = 16;      // after the 0.5 pixel shuffle
constexpr float kTol = 1e-5f;        // features, relative to their largest: fp32 both sides
constexpr float kLogitTol = 5e-4f;   // logits through the tower, projector and language model

nlohmann::json read_json(const std::string& fixture, const std::string& file) {
  return nlohmann::json::parse(read_text_file(fixture_dir(fixture) + "/" + file).value());
}

// The fixture whose expected.json a fixture's outputs must equal (internvl_chat: internvl's).
std::string reference_of(const std::string& fixture) { return fixture == "internvl_chat" ? "internvl" : fixture; }

// The processor's tiles (internvl's pixel_values.f32) as StepImages of (tiles * 8) x 8 patches.
std::vector<StepImage> read_pixels() {
  const nlohmann::json j = read_json("internvl", "expected.json");
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
  std::vector<std::vector<float>> out;
  const nlohmann::json j = read_json(fixture, "expected.json");  // the loop reads into it
  for (const auto& im : j.at("images")) {
    std::vector<float>& f = out.emplace_back();
    for (const auto& row : im.at("features")) for (float v : row.get<std::vector<float>>()) f.push_back(v);
  }
  return out;
}

using Tower = testing::LoadedTower<InternVision>;

// The fixture's tower under internvl_tensors' names; `mutate` edits the config read first.
std::unique_ptr<Tower> load_tower(const std::string& fixture, const std::function<void(VisionConfig&)>& mutate = {}) {
  auto t = std::make_unique<Tower>();
  auto v = read_internvl_vision(read_json(fixture, "config.json"), kTextVocab);
  EXPECT_TRUE(v.has_value()) << v.status().to_string();
  if (!v) return nullptr;
  t->v = *v;
  if (mutate) mutate(t->v);
  return testing::load_tower_from(*t, fixture_dir(fixture), kTextHidden,
                                  [](std::map<std::string, RawTensor> m) { return internvl_tensors(std::move(m)); })
             ? std::move(t)
             : nullptr;
}

std::vector<std::vector<float>> encode(Tower& t, const std::vector<StepImage>& images) {
  return testing::encode_each(t, images, kTextHidden,
                              [](const StepImage& im) { return (im.grid_h / kSide) * kTileTokens; });
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
  float worst = 0.0f;
  for (size_t i = 0; i < pixels.size(); ++i) {
    const float err = relative_error(encode(*t, {pixels[i]}).at(0), want[i]);
    EXPECT_LE(err, kTol) << "image " << i;
    worst = std::max(worst, err);
  }
  const auto together = encode(*t, {pixels[2], pixels[0], pixels[1]});
  ASSERT_EQ(together.size(), 3u);
  EXPECT_LE(relative_error(together[0], want[2]), kTol);
  EXPECT_LE(relative_error(together[1], want[0]), kTol);
  EXPECT_LE(relative_error(together[2], want[1]), kTol);
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
  EXPECT_GT(relative_error(encode(*last, {pixels[1]}).at(0), want[1]), 1e-3f);
  auto normed = load_tower("internvl_rms", [](VisionConfig& v) { v.final_norm = true; });
  ASSERT_NE(normed, nullptr);
  EXPECT_GT(relative_error(encode(*normed, {pixels[1]}).at(0), want[1]), 1e-3f);
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
  auto v = read_internvl_vision(read_json("internvl", "config.json"), kTextVocab);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::internvl);
  EXPECT_EQ(v->merge, 2);
  EXPECT_EQ(v->patches_per_side(), kSide);
  EXPECT_EQ(v->image_tokens(3 * kSide, kSide), 3 * kTileTokens);
  EXPECT_EQ(v->feature_layers, std::vector<int>{2});
  EXPECT_TRUE(v->qkv_bias);
  EXPECT_FALSE(v->rms_norm || v->qk_norm || v->final_norm);
  EXPECT_EQ(v->image_token, kImage);
  auto r = read_internvl_vision(read_json("internvl_rms", "config.json"), kTextVocab);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_TRUE(r->rms_norm && r->qk_norm);
  EXPECT_FALSE(r->qkv_bias);
  EXPECT_FALSE(r->final_norm);  // hidden_states[-2] skips the final norm
  EXPECT_EQ(r->feature_layers, std::vector<int>{2});
  auto chat = read_internvl_vision(read_json("internvl_chat", "config.json"), kTextVocab);
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  EXPECT_EQ(chat->hidden_size, v->hidden_size);
  EXPECT_EQ(chat->feature_layers, v->feature_layers);
  EXPECT_EQ(chat->qkv_bias, v->qkv_bias);
  EXPECT_EQ(chat->image_token, kImage);
  for (const auto& [fixture, arch] : {std::pair{"internvl", "qwen2"}, {"internvl_rms", "qwen3"}, {"internvl_chat", "qwen2"}}) {
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
  const nlohmann::json base = read_json("internvl", "config.json"), chat = read_json("internvl_chat", "config.json");
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> bad = {
      {[](nlohmann::json& j) { j["vision_config"]["norm_type"] = "batch_norm"; }, "norm_type"},
      {[](nlohmann::json& j) { j["vision_config"]["hidden_act"] = "relu"; }, "hidden_act"},
      {[](nlohmann::json& j) { j["vision_config"]["image_size"] = nlohmann::json::array({32, 64}); }, "image_size"},
      {[](nlohmann::json& j) { j["vision_config"]["use_mask_token"] = true; }, "use_mask_token"},
      {[](nlohmann::json& j) { j["downsample_ratio"] = 0.3; }, "downsample_ratio"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = 5; }, "vision_feature_layer"},
      {[](nlohmann::json& j) { j["vision_feature_select_strategy"] = "full"; }, "vision_feature_select_strategy"},
      {[](nlohmann::json& j) { j["image_token_id"] = 9999; }, "image_token_id"},
  };
  for (const auto& [edit, field] : bad) {
    nlohmann::json j = base;
    edit(j);
    const auto v = read_internvl_vision(j, kTextVocab);
    ASSERT_FALSE(v.has_value()) << field;
    EXPECT_NE(v.status().message().find(field), std::string::npos) << v.status().message();
  }
  nlohmann::json v1 = chat;
  v1["ps_version"] = "v1";
  auto refused = read_internvl_vision(v1, kTextVocab);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("ps_version"), std::string::npos) << refused.status().message();
  nlohmann::json internlm = chat;
  internlm["llm_config"]["architectures"] = {"InternLM2ForCausalLM"};
  auto text = internvl_text_config(internlm);
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.status().message().find("InternLM2ForCausalLM"), std::string::npos) << text.status().message();
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
  const nlohmann::json j = read_json("internvl", "expected.json");
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

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int> images;
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

class InternVLModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    pixels_ = read_pixels();
    ASSERT_EQ(pixels_.size(), 3u);
    const nlohmann::json j = read_json(reference_of(GetParam()), "expected.json");
    for (const auto& c : j.at("cases"))
      cases_.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                        c.at("logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>()});
    ASSERT_FALSE(cases_.empty());
    auto ck = Checkpoint::open(fixture_dir(GetParam()));
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    ASSERT_EQ((*ck)->config().vision.kind, VisionKind::internvl);
    auto model = load_llama(**ck, *backend_, LoadOptions{.max_batch_tokens = 256, .progress = false});
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    model_ = std::move(*model);
  }
  float logit_diff(const std::vector<float>& got, const Case& c) const {
    return testing::logit_diff(got, static_cast<size_t>(model_->config().vocab_size), c.logits);
  }
  // The StepImages of prompt rows [from, to): one per run of image tokens touching the range.
  std::vector<StepImage> images_of(const Case& c, size_t from, size_t to) const {
    std::vector<StepImage> out;
    size_t next = 0;
    for (size_t r = 0; r < c.prompt.size(); ++r) {
      if (c.prompt[r] != kImage || (r > 0 && c.prompt[r - 1] == kImage)) continue;
      EXPECT_EQ(c.prompt[r - 1], kImgStart);
      const StepImage& im = pixels_.at(static_cast<size_t>(c.images.at(next++)));
      const size_t t = static_cast<size_t>(model_->config().vision.image_tokens(im.grid_h, im.grid_w));
      EXPECT_EQ(c.prompt.at(r + t), kImgEnd);
      if (r < to && r + t > from) {
        const size_t first = from > r ? from - r : 0;
        out.push_back({static_cast<int32_t>(r + first - from), im.pixels, im.grid_h, im.grid_w, static_cast<int32_t>(first)});
      }
    }
    return out;
  }
  std::vector<float> prefill(const Case& c, size_t size, const KvCache& kv) {
    return testing::prefill_chunks(*model_, *backend_, kv, c.prompt, size, kPageSize, kPages,
                                   [&](size_t from, size_t to) { return images_of(c, from, to); });
  }
  static constexpr int kPageSize = 16, kPages = 12;
  std::unique_ptr<Backend> backend_ = make_cpu_backend({.n_threads = 2});
  std::vector<StepImage> pixels_;
  std::vector<Case> cases_;
  std::unique_ptr<Model> model_;
};

// Every prompt position's logits in one prefill, then cached greedy decode steps.
TEST_P(InternVLModel, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  float worst = 0.0f;
  for (const Case& c : cases_) {
    auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    const std::vector<float> logits = prefill(c, 0, *kv);
    ASSERT_EQ(logits.size(), c.prompt.size() * static_cast<size_t>(model_->config().vocab_size));
    const float d = logit_diff(logits, c);
    EXPECT_LE(d, kLogitTol) << "prompt of " << c.prompt.size();
    worst = std::max(worst, d);
    const float* last = logits.data() + (c.prompt.size() - 1) * static_cast<size_t>(model_->config().vocab_size);
    EXPECT_EQ(testing::greedy_decode(*model_, *backend_, *kv, last, static_cast<int>(c.prompt.size()), c.greedy.size(),
                                     kPageSize, kPages),
              c.greedy);
  }
  std::printf("[ measured ] %s: largest |logit difference| from transformers: %.3g\n", GetParam().c_str(), worst);
}

// Chunks of 5 and 7 rows cut the images anywhere (inside tiles and between them): each chunk
// scatters its rows of the image's cached features.
TEST_P(InternVLModel, ChunksCuttingImagesGiveTheSameLogits) {
  float worst = 0.0f;
  for (size_t size : {5, 7})
    for (const Case& c : cases_) {
      auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
      ASSERT_TRUE(kv.has_value());
      const float d = logit_diff(prefill(c, size, *kv), c);
      EXPECT_LE(d, kLogitTol) << "prompt of " << c.prompt.size() << " in chunks of " << size;
      worst = std::max(worst, d);
    }
  std::printf("[ measured ] %s: largest |logit difference| in chunks of 5 and 7: %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, InternVLModel, ::testing::Values("internvl", "internvl_rms", "internvl_chat"));

}  // namespace
}  // namespace brigade
