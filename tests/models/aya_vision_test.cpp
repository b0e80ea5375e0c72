// Aya Vision (AyaVisionForConditionalGeneration; VisionKind::aya_vision: TileVision) against
// transformers 5.25 (tests/fixtures/aya_vision, written by scripts/make_aya_vision_fixtures.py): each
// tile's features (get_image_features' pooler_output, split per tile) from GotOcr2ImageProcessorPil's
// pixel_values, alone and several in one call (the tower read at hidden_states[-2], the pixel shuffle,
// LayerNorm and SwiGLU); reading the last state instead, or swapping the SwiGLU's halves, moves them;
// the config and bad ones; then the Cohere2 language model with images: every position's logits (the
// first 32 ids') and the greedy tokens, whole and in chunks that cut the tiles anywhere. Each tile is
// an image of its own, one run of <|IMG_PATCH|> after TILE_k or TILE_GLOBAL.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "hf_fixture.h"
#include "image_prompts.h"
#include "model_test_util.h"
#include "tests/vision_fixture.h"
#include "models/aya_vision_config.h"
#include "models/gemma_config.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/tile_vision.h"

namespace brigade {
namespace {

using testing::encode_images;
using testing::fixture_dir;
using testing::fixture_json;
using testing::relative_error;

constexpr const char* kFixture = "aya_vision";
constexpr int kTextHidden = 32;
constexpr int kTextVocab = 271;
constexpr int32_t kImage = 11;  // <|IMG_PATCH|>
constexpr int kSide = 8;        // 32-pixel tiles in 4-pixel patches
constexpr int kTileTokens = 16;
constexpr float kTol = 1e-5f;
constexpr float kLogitTol = 5e-4f;

testing::FixtureTiles read_tiles() { return testing::read_fixture_tiles(kFixture, 32, kSide); }

std::vector<std::vector<float>> read_tile_features() { return testing::read_tile_features(kFixture, kTileTokens, kTextHidden); }

using Tower = testing::LoadedTower<TileVision>;

std::unique_ptr<Tower> load_tower(const std::function<void(VisionConfig&)>& mutate = {},
                                  const std::function<void(Tower&, std::map<std::string, RawTensor>&)>& edit = {}) {
  return testing::load_fixture_tower<TileVision>(
      fixture_dir(kFixture), read_aya_vision(fixture_json(kFixture, "config.json"), kTextVocab, kTextHidden), kTextHidden,
      [edit](Tower& t, std::map<std::string, RawTensor> m) {
        m = gemma3_tensors(std::move(m));
        if (edit) edit(t, m);
        return m;
      },
      mutate);
}

TEST(AyaVisionTower, FeaturesMatchTransformersAloneAndTogether) {
  const testing::FixtureTiles t = read_tiles();
  const auto want = read_tile_features();
  ASSERT_EQ(t.tiles.size(), 7u);
  ASSERT_EQ(want.size(), t.tiles.size());
  auto tower = load_tower();
  ASSERT_NE(tower, nullptr);
  std::vector<size_t> all(t.tiles.size());
  std::iota(all.rbegin(), all.rend(), size_t{0});
  const float worst = testing::expect_features_alone_and_together(*tower, t.tiles, want, all, kTol);
  std::printf("[ measured ] aya_vision: largest relative feature difference from transformers: %.3g\n", worst);
}

// hidden_states[-1] for hidden_states[-2], or the SwiGLU's halves swapped (silu on the first),
// moves the features far beyond tolerance.
TEST(AyaVisionTower, AnotherLayerOrTheHalvesSwappedMoveTheFeatures) {
  const testing::FixtureTiles t = read_tiles();
  const auto want = read_tile_features();
  auto last = load_tower([](VisionConfig& v) { v.feature_layers = {3}; });
  ASSERT_NE(last, nullptr);
  EXPECT_GT(relative_error(encode_images(*last, {t.tiles[1]}).at(0), want[1]), 1e-3f);
  auto swapped = load_tower({}, [](Tower& tw, std::map<std::string, RawTensor>& m) {
    for (const char* name : {"multi_modal_projector.linear_1.weight", "multi_modal_projector.linear_1.bias"}) {
      RawTensor& r = m.at(name);  // f32 rows [40, ...]: the halves' rows exchanged
      std::vector<uint8_t>& out = tw.bytes.emplace_back(r.bytes.begin(), r.bytes.end());
      const size_t half = out.size() / 2;
      std::rotate(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(half), out.end());
      r.bytes = out;
    }
  });
  ASSERT_NE(swapped, nullptr);
  EXPECT_GT(relative_error(encode_images(*swapped, {t.tiles[1]}).at(0), want[1]), 1e-3f);
}

TEST(AyaVisionConfig, ReadsTheFixtureAndTheCheckpointsShapes) {
  auto v = read_aya_vision(fixture_json(kFixture, "config.json"), kTextVocab, kTextHidden);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::aya_vision);
  EXPECT_EQ(v->merge, 2);
  EXPECT_EQ(v->feature_layers, std::vector<int>{2});
  EXPECT_FALSE(v->final_norm);
  EXPECT_EQ(v->merger_intermediate, 40);
  EXPECT_FLOAT_EQ(v->projector_eps, 1e-5f);
  EXPECT_EQ(v->image_tokens(kSide, kSide), kTileTokens);
  EXPECT_EQ(v->image_token, kImage);
  EXPECT_TRUE(v->tiled());
  auto c = parse_hf_config(read_text_file(fixture_dir(kFixture) + "/config.json").value());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "cohere2");
  EXPECT_EQ(c->vision.kind, VisionKind::aya_vision);
  EXPECT_TRUE(c->tie_embeddings);
  // aya-vision-8b's shape: SigLIP so400m/14 at 364 pixels (26 a side), downsample 2: 169 tokens a tile.
  const nlohmann::json real = {{"architectures", {"AyaVisionForConditionalGeneration"}},
                               {"alignment_intermediate_size", 28672},
                               {"vision_config", {{"image_size", 364}, {"num_attention_heads", 16}, {"num_hidden_layers", 27}}}};
  auto r = read_aya_vision(real, 256000, 4096);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->image_tokens(r->patches_per_side(), r->patches_per_side()), 169);
  EXPECT_EQ(r->image_token, 255036);
  EXPECT_EQ(r->feature_layers, std::vector<int>{27});
}

TEST(AyaVisionConfig, RefusesWhatItCannotRunByName) {
  testing::expect_refused_by_name(fixture_json(kFixture, "config.json"), {
      {[](nlohmann::json& j) { j["vision_config"]["hidden_act"] = "relu"; }, "hidden_act"},
      {[](nlohmann::json& j) { j["vision_feature_select_strategy"] = "default"; }, "vision_feature_select_strategy"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = nlohmann::json::array({-1, -2}); }, "vision_feature_layer"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = 9; }, "vision_feature_layer"},
      {[](nlohmann::json& j) { j["downsample_factor"] = 3; }, "downsample_factor"},
      {[](nlohmann::json& j) { j["alignment_intermediate_size"] = 41; }, "alignment_intermediate_size"},
      {[](nlohmann::json& j) { j["image_token_index"] = 9999; }, "image_token_index"},
  }, [](const nlohmann::json& j) { return read_aya_vision(j, kTextVocab, kTextHidden); });
  // AyaVisionConfig's own vision defaults: 14 heads do not divide 1152.
  auto d = read_aya_vision(nlohmann::json{{"model_type", "aya_vision"}}, 256000, 4096);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.status().message().find("num_attention_heads"), std::string::npos) << d.status().message();
  nlohmann::json llama = fixture_json(kFixture, "config.json");
  llama["text_config"]["model_type"] = "llama";
  auto text = aya_vision_text_config(llama);
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.status().message().find("text_config.model_type"), std::string::npos) << text.status().message();
}

TEST(AyaVisionConfig, ChecksTheProcessorsTokensATile) {
  EXPECT_TRUE(check_aya_vision_processor(fixture_dir(kFixture), kTileTokens).is_ok());
  const Status st = check_aya_vision_processor(fixture_dir(kFixture), 169);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("make 16 tokens a tile"), std::string::npos) << st.message();
}

class AyaVisionModel : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::load_tiled_prompts(prompts_, kFixture, VisionKind::aya_vision, kImage, 32, kSide);
  }
  testing::ImagePrompts prompts_;
};

TEST_F(AyaVisionModel, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const float worst = prompts_.expect_prompts_match(kLogitTol);
  std::printf("[ measured ] aya_vision: largest |logit difference| from transformers: %.3g\n", worst);
}

TEST_F(AyaVisionModel, ChunksCuttingTilesGiveTheSameLogits) {
  const float worst = prompts_.expect_chunks_match(kLogitTol, {5, 7});
  std::printf("[ measured ] aya_vision: largest |logit difference| in chunks of 5 and 7: %.3g\n", worst);
}

}  // namespace
}  // namespace brigade
