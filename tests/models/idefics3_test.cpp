// Idefics3 and SmolVLM (Idefics3ForConditionalGeneration, SmolVLMForConditionalGeneration;
// VisionKind::idefics3: TileVision) against transformers 5.25 (tests/fixtures/idefics3 and
// smolvlm, written by scripts/make_idefics3_fixtures.py): each tile's features (get_image_features'
// pooler_output, split per tile) from Idefics3ImageProcessorPil's pixel_values, alone and several in
// one call; the post_layernorm dropped, which the comparison must catch; the bucketed position ids;
// the configs, real checkpoints' shapes and bad ones; then the language model with images
// (LlamaModel with the tower): every position's logits (the first 32 ids') and the greedy tokens,
// whole and in chunks that cut the tiles anywhere. Each tile is an image of its own, one run of
// image tokens between the processor's text (<fake_token_around_image>, <row_R_col_C>, "\n").
#include <gtest/gtest.h>

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
#include "models/idefics3_config.h"
#include "models/tile_vision.h"
#include "models/mapped_file.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::encode_images;
using testing::fixture_dir;
using testing::fixture_json;
using testing::relative_error;

constexpr int kTextHidden = 32;
constexpr int kTextVocab = 299;
constexpr int32_t kImage = 5;
constexpr int kSide = 8;             // 32-pixel tiles in 4-pixel patches
constexpr int kTilePixels = 32;
constexpr float kTol = 1e-5f;        // features, relative to their largest: fp32 both sides
constexpr float kLogitTol = 5e-4f;   // logits through the tower, connector and language model

int tile_tokens(const std::string& fixture) { return fixture == "smolvlm" ? 4 : 16; }

testing::FixtureTiles read_tiles(const std::string& fixture) { return testing::read_fixture_tiles(fixture, kTilePixels, kSide); }

std::vector<std::vector<float>> read_tile_features(const std::string& fixture) {
  return testing::read_tile_features(fixture, tile_tokens(fixture), kTextHidden);
}

using Tower = testing::LoadedTower<TileVision>;

std::unique_ptr<Tower> load_tower(const std::string& fixture, const std::function<void(VisionConfig&)>& mutate = {}) {
  return testing::load_fixture_tower<TileVision>(
      fixture_dir(fixture), read_idefics3_vision(fixture_json(fixture, "config.json"), kTextVocab), kTextHidden,
      [](Tower&, std::map<std::string, RawTensor> m) { return idefics3_tensors(std::move(m)); }, mutate);
}

class Idefics3TowerTest : public ::testing::TestWithParam<std::string> {};

// idefics3: scale_factor 2 over 2 x 3, 3 x 3 and 3 x 2 tiles and their global tiles; smolvlm:
// scale_factor 4, one tile an image.
TEST_P(Idefics3TowerTest, FeaturesMatchTransformersAloneAndTogether) {
  const testing::FixtureTiles t = read_tiles(GetParam());
  const auto want = read_tile_features(GetParam());
  ASSERT_EQ(t.tiles.size(), want.size());
  auto tower = load_tower(GetParam());
  ASSERT_NE(tower, nullptr);
  std::vector<size_t> all(t.tiles.size());
  std::iota(all.rbegin(), all.rend(), size_t{0});  // every tile in one call, in reverse
  const float worst = testing::expect_features_alone_and_together(*tower, t.tiles, want, all, kTol);
  std::printf("[ measured ] %s: largest relative feature difference from transformers: %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Idefics3TowerTest, ::testing::Values("idefics3", "smolvlm"));

// last_hidden_state without post_layernorm moves the features far beyond tolerance; a tile of
// another grid, or an image of several tiles in one, is refused.
TEST(Idefics3TowerMutation, DroppingThePostNormMovesTheFeatures) {
  const testing::FixtureTiles t = read_tiles("idefics3");
  const auto want = read_tile_features("idefics3");
  auto raw = load_tower("idefics3", [](VisionConfig& v) { v.final_norm = false; });
  ASSERT_NE(raw, nullptr);
  EXPECT_GT(relative_error(encode_images(*raw, {t.tiles[3]}).at(0), want[3]), 1e-3f);
  auto tower = load_tower("idefics3");
  ASSERT_NE(tower, nullptr);
  auto buf = tower->backend->allocate(size_t{64} * kTextHidden * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  StepImage two = t.tiles[0];
  two.grid_h = 2 * kSide;  // two tiles as one image: refused by its grid
  Status st = tower->tower.encode({&two, 1}, buf->view(DType::f32, {32, kTextHidden}));
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("8 x 8 patches"), std::string::npos) << st.message();
}

// transformers' bucketed positions (Idefics3VisionEmbeddings) are the identity for whole tiles at
// the sides the checkpoints use (the fixture's 8, Idefics3-8B's 26, SmolVLM2-2.2B's 27, SmolVLM's
// 32; 24 and 64 besides), as torch computed them with the same float32 arithmetic.
TEST(Idefics3Tower, PositionIdsOfWholeTilesAreTheTable) {
  for (int n : {8, 16, 24, 26, 27, 32, 64}) {
    std::vector<int32_t> want(static_cast<size_t>(n) * static_cast<size_t>(n));
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(idefics3_position_ids(n), want) << n << " patches a side";
  }
}

TEST(Idefics3Config, ReadsBothArchitectures) {
  for (const auto& [fixture, merge] : {std::pair{"idefics3", 2}, {"smolvlm", 4}}) {
    auto v = read_idefics3_vision(fixture_json(fixture, "config.json"), kTextVocab);
    ASSERT_TRUE(v.has_value()) << fixture << ": " << v.status().to_string();
    EXPECT_EQ(v->kind, VisionKind::idefics3);
    EXPECT_EQ(v->merge, merge);
    EXPECT_EQ(v->patches_per_side(), kSide);
    EXPECT_EQ(v->image_tokens(kSide, kSide), tile_tokens(fixture));
    EXPECT_EQ(v->image_token, kImage);
    EXPECT_TRUE(v->final_norm);
    EXPECT_FALSE(v->whole_images()) << "the language model reads image tokens causally";
    auto c = parse_hf_config(read_text_file(fixture_dir(fixture) + "/config.json").value());
    ASSERT_TRUE(c.has_value()) << fixture << ": " << c.status().to_string();
    EXPECT_EQ(c->arch, "llama") << fixture;
    EXPECT_EQ(c->vision.kind, VisionKind::idefics3) << fixture;
    EXPECT_EQ(c->hidden_size, kTextHidden) << fixture;
    EXPECT_TRUE(c->multimodal_text) << fixture;
  }
  // The real checkpoints' shapes: SmolVLM-256M / 500M (512-pixel tiles, 16-pixel patches, scale
  // factor 4: 64 tokens a tile), SmolVLM2-2.2B (384 pixels in 14-pixel patches: 27 a side, the
  // last 6 pixels dropped; scale factor 3: 81), Idefics3-8B (364 / 14, scale factor 2: 169).
  const nlohmann::json smol = {{"architectures", {"Idefics3ForConditionalGeneration"}}, {"scale_factor", 4},
                               {"image_token_id", 49190},
                               {"vision_config", {{"hidden_size", 768}, {"image_size", 512}, {"patch_size", 16},
                                                  {"num_attention_heads", 12}, {"intermediate_size", 3072}}}};
  const nlohmann::json smol2 = {{"architectures", {"SmolVLMForConditionalGeneration"}}, {"scale_factor", 3},
                                {"image_token_id", 49190},
                                {"vision_config", {{"hidden_size", 1152}, {"image_size", 384}, {"patch_size", 14},
                                                   {"num_hidden_layers", 27}, {"intermediate_size", 4304}}}};
  const nlohmann::json idefics3 = {{"model_type", "idefics3"},
                                   {"vision_config", {{"image_size", 364}, {"patch_size", 14}}}};
  for (const auto& [j, tokens] : {std::pair{smol, 64}, {smol2, 81}, {idefics3, 169}}) {
    auto v = read_idefics3_vision(j, 128259);
    ASSERT_TRUE(v.has_value()) << j.dump() << ": " << v.status().to_string();
    EXPECT_EQ(v->image_tokens(v->patches_per_side(), v->patches_per_side()), tokens) << j.dump();
  }
  auto d = read_idefics3_vision(idefics3, 128259);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->image_token, 128257);  // Idefics3Config's default
  EXPECT_EQ(d->hidden_size, 1152);
}

TEST(Idefics3Config, RefusesWhatItCannotRunByName) {
  testing::expect_refused_by_name(fixture_json("idefics3", "config.json"), {
      {[](nlohmann::json& j) { j["vision_config"]["hidden_act"] = "relu"; }, "hidden_act"},
      {[](nlohmann::json& j) { j["vision_config"]["num_channels"] = 4; }, "num_channels"},
      {[](nlohmann::json& j) { j["vision_config"]["image_size"] = 3; }, "image_size"},
      {[](nlohmann::json& j) { j["scale_factor"] = 3; }, "scale_factor"},
      {[](nlohmann::json& j) { j["image_token_id"] = 9999; }, "image_token_id"},
      {[](nlohmann::json& j) { j["vision_config"] = 5; }, "vision_config"},
  }, [](const nlohmann::json& j) { return read_idefics3_vision(j, kTextVocab); });
  // transformers' own defaults (224-pixel tiles of 32-pixel patches: 7 a side) do not divide by
  // scale_factor 2: its pixel shuffle could not run either.
  auto d = read_idefics3_vision(nlohmann::json{{"model_type", "smolvlm"}}, 128259);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.status().message().find("scale_factor"), std::string::npos) << d.status().message();
  nlohmann::json mistral = fixture_json("idefics3", "config.json");
  mistral["text_config"]["model_type"] = "mistral";
  auto text = idefics3_text_config(mistral);
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.status().message().find("text_config.model_type"), std::string::npos) << text.status().message();
}

// processor_config.json's image_seq_len must be the tower's tokens a tile.
TEST(Idefics3Config, ChecksTheProcessorsImageSeqLen) {
  EXPECT_TRUE(check_idefics3_image_seq_len(fixture_dir("idefics3"), 16).is_ok());
  EXPECT_TRUE(check_idefics3_image_seq_len(fixture_dir("smolvlm"), 4).is_ok());
  const Status st = check_idefics3_image_seq_len(fixture_dir("idefics3"), 64);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("image_seq_len 16"), std::string::npos) << st.message();
}

class Idefics3Model : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    testing::load_tiled_prompts(prompts_, GetParam(), VisionKind::idefics3, kImage, kTilePixels, kSide);
  }
  testing::ImagePrompts prompts_;
};

TEST_P(Idefics3Model, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const float worst = prompts_.expect_prompts_match(kLogitTol);
  std::printf("[ measured ] %s: largest |logit difference| from transformers: %.3g\n", GetParam().c_str(), worst);
}

// Chunks of 5 and 7 rows cut the tiles anywhere: each chunk scatters its rows of the tile's cached
// features.
TEST_P(Idefics3Model, ChunksCuttingTilesGiveTheSameLogits) {
  const float worst = prompts_.expect_chunks_match(kLogitTol, {5, 7});
  std::printf("[ measured ] %s: largest |logit difference| in chunks of 5 and 7: %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Idefics3Model, ::testing::Values("idefics3", "smolvlm"));

}  // namespace
}  // namespace brigade
