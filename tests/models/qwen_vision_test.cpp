// The Qwen2.5-VL, Qwen2-VL and Qwen3-VL vision towers against transformers (tests/fixtures/
// qwen2_5_vl and qwen2_vl, written by scripts/make_qwen_vl_fixtures.py; qwen3_vl, by
// scripts/make_qwen3_vl_fixtures.py): each image's merged features (and Qwen3-VL's DeepStack
// features), images encoded one at a time and several in one call; mutations (the grid
// transposed, the windows dropped, the position embeddings or patch bias zeroed) that the
// comparison must catch; refused grids, pixel counts and DeepStack outputs; read_qwen_vl_vision
// on the fixtures' configs and on bad ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "hf_fixture.h"
#include "tests/vision_fixture.h"
#include "models/qwen_vision.h"
#include "models/safetensors.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::flatten_floats;
using testing::relative_error;

constexpr int kTextHidden = 64;
constexpr int kTextVocab = 320;
// fp32 both sides, sums in other orders: the largest difference over an image's features,
// relative to their largest magnitude.
constexpr float kTol = 1e-4f;

// One image's tower outputs: the merged features and (Qwen3-VL) each DeepStack tap's.
struct Features {
  std::vector<float> features;                 // [tokens * 64]
  std::vector<std::vector<float>> deepstack;  // [tap][tokens * 64]
};

struct FixtureImage : Features {
  StepImage image;
};

std::vector<FixtureImage> read_images(const std::string& fixture) {
  std::vector<FixtureImage> out;
  const auto j = testing::read_fixture_json(fixture_dir(fixture), "expected.json");
  if (j.is_null()) return out;
  for (const auto& im : j.at("images")) {
    FixtureImage f;
    const auto thw = im.at("grid_thw").get<std::vector<int>>();
    f.image = {0, std::make_shared<std::vector<float>>(flatten_floats(im.at("pixel_values"))), thw.at(1), thw.at(2)};
    f.features = flatten_floats(im.at("features"));
    if (im.contains("deepstack"))  // Qwen3-VL: get_image_features' deepstack_features, one per tap
      for (const auto& tap : im.at("deepstack")) f.deepstack.push_back(flatten_floats(tap));
    out.push_back(std::move(f));
  }
  return out;
}

nlohmann::json read_config(const std::string& fixture) { return testing::read_fixture_json(fixture_dir(fixture), "config.json"); }

VisionKind kind_of(const std::string& fixture) {
  return fixture == "qwen2_5_vl" ? VisionKind::qwen2_5_vl
         : fixture == "qwen3_vl" ? VisionKind::qwen3_vl
                                 : VisionKind::qwen2_vl;
}

// A fixture's tower, loaded on the CPU backend.
using Tower = testing::LoadedTower<QwenVision>;

// v_override, when set, replaces the config's VisionConfig, and the tensors `zeroed` read as
// zeros (mutations of the model).
std::unique_ptr<Tower> load_tower(const std::string& fixture, const VisionConfig* v_override = nullptr,
                                  const std::vector<std::string>& zeroed = {}) {
  // The Conv3d patch weight [h, 3, T, p, p] reads as [h, 3, T, p p] (read_safetensors folds the
  // fifth dimension into the fourth); flatten_qwen_patch_embed makes it the matrix load() reads.
  auto rename = [&zeroed](Tower& t, std::map<std::string, RawTensor> tensors) {
    flatten_qwen_patch_embed(tensors);
    for (const std::string& name : zeroed) testing::zero_tensor(t, tensors.at(name));
    return tensors;
  };
  return testing::load_fixture_tower<QwenVision>(
      fixture_dir(fixture), read_qwen_vl_vision(read_config(fixture), kTextVocab, kind_of(fixture)), kTextHidden, rename,
      [v_override](VisionConfig& v) {
        if (v_override != nullptr) v = *v_override;
      });
}

// Encodes images in one call; each image's outputs, in order.
std::vector<Features> encode(Tower& t, const std::vector<StepImage>& images) {
  int64_t tokens = 0;
  for (const StepImage& im : images) tokens += t.v.image_tokens(im.grid_h, im.grid_w);
  const auto n_taps = static_cast<size_t>(t.tower.n_deepstack());
  std::vector<Buffer> bufs;
  std::vector<Tensor> outs;  // out, then each tap's
  for (size_t k = 0; k <= n_taps; ++k) {
    auto buf = t.backend->allocate(static_cast<size_t>(tokens * kTextHidden) * sizeof(float));
    EXPECT_TRUE(buf.has_value());
    if (!buf) return {};
    outs.push_back(buf->view(DType::f32, {tokens, kTextHidden}));
    bufs.push_back(std::move(*buf));
  }
  const Status st = t.tower.encode(images, outs[0], std::span<const Tensor>(outs).subspan(1));
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  std::vector<std::vector<float>> all(outs.size(), std::vector<float>(static_cast<size_t>(tokens * kTextHidden)));
  for (size_t k = 0; k < outs.size(); ++k) t.backend->download(all[k].data(), outs[k]);
  std::vector<Features> each;
  size_t at = 0;
  for (const StepImage& im : images) {
    const size_t n = static_cast<size_t>(t.v.image_tokens(im.grid_h, im.grid_w)) * kTextHidden;
    auto rows = [&](const std::vector<float>& v) {
      const auto first = v.begin() + static_cast<std::ptrdiff_t>(at);
      return std::vector<float>(first, first + static_cast<std::ptrdiff_t>(n));
    };
    Features f{rows(all[0]), {}};
    for (size_t k = 1; k < all.size(); ++k) f.deepstack.push_back(rows(all[k]));
    each.push_back(std::move(f));
    at += n;
  }
  return each;
}

// A fixture's images and tower, for each of the three families.
class QwenVisionFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    images_ = read_images(GetParam());
    ASSERT_EQ(images_.size(), 3u);
    t_ = load_tower(GetParam());
    ASSERT_NE(t_, nullptr);
  }
  // Encodes the fixture's images `which` in one call and compares each with transformers', its
  // DeepStack features included.
  void expect_features(const std::vector<size_t>& which) {
    std::vector<StepImage> batch;
    for (size_t i : which) batch.push_back(images_[i].image);
    const auto got = encode(*t_, batch);
    ASSERT_EQ(got.size(), which.size());
    for (size_t k = 0; k < which.size(); ++k) {
      const FixtureImage& want = images_[which[k]];
      EXPECT_LE(relative_error(got[k].features, want.features), kTol) << "image " << which[k] << " at " << k;
      ASSERT_EQ(got[k].deepstack.size(), want.deepstack.size());
      for (size_t tap = 0; tap < want.deepstack.size(); ++tap)
        EXPECT_LE(relative_error(got[k].deepstack[tap], want.deepstack[tap]), kTol)
            << "image " << which[k] << " at " << k << ", DeepStack tap " << tap;
    }
  }
  std::vector<FixtureImage> images_;
  std::unique_ptr<Tower> t_;
};

TEST_P(QwenVisionFixture, EachImageAloneGivesTransformersFeatures) {
  for (size_t i = 0; i < images_.size(); ++i) expect_features({i});
}

// The three images in one call, in another order and one twice: one pass, each image's rows,
// windows and merged tokens beside the others'.
TEST_P(QwenVisionFixture, SeveralImagesInOneCallGiveEachImagesFeatures) { expect_features({2, 0, 1, 2}); }

// A call with a larger image than the scratch was made for regrows it; a call of more images
// than one pass takes (kImagesPerPass) runs in several, each image's features unchanged.
TEST_P(QwenVisionFixture, ScratchRegrowsAndManyImagesRunInSeveralPasses) {
  expect_features({2});
  expect_features({0});
  std::vector<size_t> many;
  for (size_t k = 0; k < 70; ++k) many.push_back((k * 2 + 1) % 3);
  expect_features(many);
}

// The comparison catches a tower that swaps the rotary's row and column positions: the same
// pixels read as a transposed grid (its own positions and, for Qwen2.5-VL, windows) are far off.
TEST_P(QwenVisionFixture, ATransposedGridMovesTheFeaturesBeyondTolerance) {
  for (size_t i : {0, 1}) {  // non-square grids
    StepImage swapped = images_[i].image;
    std::swap(swapped.grid_h, swapped.grid_w);
    EXPECT_GT(relative_error(encode(*t_, {swapped}).at(0).features, images_[i].features), 100 * kTol) << "image " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(QwenVision, QwenVisionFixture, ::testing::Values("qwen2_5_vl", "qwen2_vl", "qwen3_vl"));

// Qwen2.5-VL with every block attending over the whole image: images of several windows move
// far beyond tolerance; the 6x6 image, one window, does not move.
TEST(QwenVision, WithoutWindowsQwen25MovesImagesOfSeveralWindowsOnly) {
  const auto images = read_images("qwen2_5_vl");
  ASSERT_EQ(images.size(), 3u);
  VisionConfig v = read_qwen_vl_vision(read_config("qwen2_5_vl"), kTextVocab, VisionKind::qwen2_5_vl).value();
  v.fullatt_blocks = {0, 1, 2};
  auto t = load_tower("qwen2_5_vl", &v);
  ASSERT_NE(t, nullptr);
  EXPECT_GT(relative_error(encode(*t, {images[0].image}).at(0).features, images[0].features), 100 * kTol);
  EXPECT_GT(relative_error(encode(*t, {images[1].image}).at(0).features, images[1].features), 100 * kTol);
  EXPECT_LE(relative_error(encode(*t, {images[2].image}).at(0).features, images[2].features), kTol);
}

// Qwen3-VL without its position embeddings, or without its patch embedding's bias: every
// image's features and DeepStack features move far beyond tolerance.
TEST(QwenVision, Qwen3WithoutPositionEmbeddingsOrPatchBiasMovesTheFeatures) {
  const auto images = read_images("qwen3_vl");
  ASSERT_EQ(images.size(), 3u);
  for (const char* name : {"model.visual.pos_embed.weight", "model.visual.patch_embed.proj.bias"}) {
    auto t = load_tower("qwen3_vl", nullptr, {name});
    ASSERT_NE(t, nullptr);
    for (size_t i = 0; i < images.size(); ++i) {
      const Features got = encode(*t, {images[i].image}).at(0);
      EXPECT_GT(relative_error(got.features, images[i].features), 100 * kTol) << name << ", image " << i;
      ASSERT_EQ(got.deepstack.size(), 2u);
      EXPECT_GT(relative_error(got.deepstack[0], images[i].deepstack[0]), 100 * kTol) << name << ", image " << i;
    }
  }
}

// Each DeepStack tap is its own merger over its own block's output: tap 0's features are not tap
// 1's, and merger 0 moved after block 1 gives neither (while the merged features stay).
TEST(QwenVision, Qwen3DeepStackTapsAreTheirBlocksAndMergers) {
  const auto images = read_images("qwen3_vl");
  ASSERT_EQ(images.size(), 3u);
  ASSERT_EQ(images[0].deepstack.size(), 2u);
  EXPECT_GT(relative_error(images[0].deepstack[0], images[0].deepstack[1]), 100 * kTol);
  VisionConfig v = read_qwen_vl_vision(read_config("qwen3_vl"), kTextVocab, VisionKind::qwen3_vl).value();
  v.deepstack_layers = {1};  // one tap, whose merger is deepstack_merger_list.0
  auto t = load_tower("qwen3_vl", &v);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->tower.n_deepstack(), 1);
  const Features got = encode(*t, {images[0].image}).at(0);
  EXPECT_LE(relative_error(got.features, images[0].features), kTol);
  EXPECT_GT(relative_error(got.deepstack.at(0), images[0].deepstack[1]), 100 * kTol);  // merger 0 on block 1
  EXPECT_GT(relative_error(got.deepstack.at(0), images[0].deepstack[0]), 100 * kTol);  // block 1, not block 0
}

// encode() takes one DeepStack output per tap: none for Qwen2-VL, two for the Qwen3-VL fixture.
TEST(QwenVision, RefusesAnotherNumberOfDeepStackOutputs) {
  for (const char* fixture : {"qwen3_vl", "qwen2_vl"}) {
    const auto images = read_images(fixture);
    ASSERT_EQ(images.size(), 3u);
    auto t = load_tower(fixture);
    ASSERT_NE(t, nullptr);
    auto buf = t->backend->allocate(9 * kTextHidden * sizeof(float));
    ASSERT_TRUE(buf.has_value());
    const Tensor out = buf->view(DType::f32, {9, kTextHidden});
    const std::vector<Tensor> one = {out};
    const std::vector<StepImage> batch = {images[2].image};  // 6x6 patches: 9 tokens
    const Status st = t->tower.encode(batch, out, std::string(fixture) == "qwen3_vl" ? std::span<const Tensor>{} : one);
    EXPECT_EQ(st.code(), StatusCode::invalid_argument) << st.to_string();
    const std::string says = std::string(fixture) == "qwen3_vl" ? "0 DeepStack outputs given; the tower has 2"
                                                                : "1 DeepStack outputs given; the tower has 0";
    EXPECT_NE(st.message().find(says), std::string::npos) << st.to_string();
  }
}

TEST(QwenVision, WindowOrderFollowsGetWindowIndex) {
  std::vector<int32_t> order, lens;
  qwen_window_order(4, 6, 3, order, lens);  // windows 3x3, 3x3, 1x3, 1x3
  EXPECT_EQ(lens, (std::vector<int32_t>{9, 9, 3, 3}));
  EXPECT_EQ(std::vector<int32_t>(order.begin(), order.begin() + 9),
            (std::vector<int32_t>{0, 1, 2, 6, 7, 8, 12, 13, 14}));
  EXPECT_EQ(std::vector<int32_t>(order.begin() + 18, order.end()), (std::vector<int32_t>{18, 19, 20, 21, 22, 23}));
  qwen_window_order(5, 2, 3, order, lens);  // 3x2, 2x2
  EXPECT_EQ(lens, (std::vector<int32_t>{6, 4}));
  qwen_window_order(3, 3, 3, order, lens);
  EXPECT_EQ(lens, (std::vector<int32_t>{9}));
}

TEST(QwenVision, RefusesBadGridsAndPixelCountsNamingTheImage) {
  const auto images = read_images("qwen2_5_vl");
  ASSERT_EQ(images.size(), 3u);
  auto t = load_tower("qwen2_5_vl");
  ASSERT_NE(t, nullptr);
  auto buf = t->backend->allocate(1024 * kTextHidden * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  auto refused = [&](StepImage bad, const std::string& says) {
    const std::vector<StepImage> batch = {images[2].image, bad};  // the bad one second: nothing runs
    const Status st = t->tower.encode(batch, buf->view(DType::f32, {9 + 1, kTextHidden}));
    EXPECT_FALSE(st.is_ok()) << says;
    EXPECT_NE(st.message().find("image 1"), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find(says), std::string::npos) << st.to_string();
  };
  StepImage odd = images[0].image;
  odd.grid_h = 3, odd.grid_w = 32;  // 96 patches, but not whole merge blocks
  refused(odd, "multiples of spatial_merge_size 2");
  StepImage empty = images[0].image;
  empty.grid_h = 0;
  refused(empty, "multiples of spatial_merge_size 2");
  StepImage huge = images[0].image;
  huge.grid_h = 130, huge.grid_w = 130;
  refused(huge, "more than the 16384");
  StepImage short_pixels = images[0].image;
  short_pixels.grid_w = 10;  // 80 patches' worth of floats wanted, 96 given
  refused(short_pixels, "needs 7680 floats");
  StepImage none = images[0].image;
  none.pixels = nullptr;
  refused(none, "got 0");
}

TEST(QwenVision, LoadRefusesAMergerOfAnotherWidth) {
  VisionConfig v = read_qwen_vl_vision(read_config("qwen2_vl"), kTextVocab, VisionKind::qwen2_vl).value();
  auto backend = make_cpu_backend({.n_threads = 1});
  auto ck = Checkpoint::from_memory("none", ModelConfig{}, {});
  WeightLoader w(*ck, *backend, std::nullopt);
  QwenVision tower;
  const Status st = tower.load(w, *backend, v, 128);
  EXPECT_NE(st.message().find("differs from the language model's hidden_size 128"), std::string::npos)
      << st.to_string();
}

TEST(QwenVision, FlopsCountWindowsAsSmallerSequences) {
  auto t25 = load_tower("qwen2_5_vl");
  ASSERT_NE(t25, nullptr);
  VisionConfig full = t25->v;
  full.fullatt_blocks = {0, 1, 2};
  auto t_full = load_tower("qwen2_5_vl", &full);
  ASSERT_NE(t_full, nullptr);
  EXPECT_GT(t25->tower.flops(8, 12), 0.0);
  EXPECT_LT(t25->tower.flops(8, 12), t_full->tower.flops(8, 12));
  EXPECT_DOUBLE_EQ(t25->tower.flops(6, 6), t_full->tower.flops(6, 6));  // one window
  EXPECT_GT(t25->tower.weight_bytes(), 0.0);
}

// Qwen3-VL's flops count its DeepStack mergers: each tap adds one merger's work per token.
TEST(QwenVision, FlopsCountTheDeepStackMergers) {
  auto t = load_tower("qwen3_vl");
  ASSERT_NE(t, nullptr);
  VisionConfig v = t->v;
  v.deepstack_layers.clear();
  auto plain = load_tower("qwen3_vl", &v);
  ASSERT_NE(plain, nullptr);
  const double wide = 4.0 * 32, tokens = 24.0;  // an 8x12 grid: 24 tokens of 2x2 patches of width 32
  EXPECT_DOUBLE_EQ(t->tower.flops(8, 12) - plain->tower.flops(8, 12), 2 * 2.0 * tokens * (wide * wide + wide * 64));
  EXPECT_GT(t->tower.weight_bytes(), plain->tower.weight_bytes());
}

// ---- read_qwen_vl_vision ----

TEST(QwenVisionConfig, ReadsTheFixtureConfigs) {
  auto v = read_qwen_vl_vision(read_config("qwen2_5_vl"), kTextVocab, VisionKind::qwen2_5_vl);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::qwen2_5_vl);
  EXPECT_TRUE(v->present() && v->dynamic());
  EXPECT_EQ(std::make_tuple(v->n_layers, v->hidden_size, v->intermediate_size, v->n_heads, v->out_hidden_size),
            std::make_tuple(3, 32, 48, 2, 64));
  EXPECT_EQ(std::make_tuple(v->patch_size, v->merge, v->temporal_patch, v->window_size), std::make_tuple(4, 2, 2, 24));
  EXPECT_EQ(v->fullatt_blocks, std::vector<int>{1});
  EXPECT_EQ(v->hidden_act, "silu");
  EXPECT_EQ(std::make_tuple(v->image_token, v->boi_token, v->eoi_token), std::make_tuple(302, 300, 301));
  EXPECT_FLOAT_EQ(v->eps, 1e-6f);
  EXPECT_EQ(v->patch_width(), 96);
  EXPECT_EQ(v->image_tokens(8, 12), 24);

  auto v2 = read_qwen_vl_vision(read_config("qwen2_vl"), kTextVocab, VisionKind::qwen2_vl);
  ASSERT_TRUE(v2.has_value()) << v2.status().to_string();
  EXPECT_EQ(v2->kind, VisionKind::qwen2_vl);
  // embed_dim is the width, hidden_size the merger's output, the MLP embed_dim * mlp_ratio.
  EXPECT_EQ(std::make_tuple(v2->n_layers, v2->hidden_size, v2->intermediate_size, v2->n_heads, v2->out_hidden_size),
            std::make_tuple(2, 32, 64, 2, 64));
  EXPECT_EQ(v2->hidden_act, "quick_gelu");  // absent from the config: Qwen2VLVisionConfig's default
  EXPECT_TRUE(v2->fullatt_blocks.empty());
  EXPECT_EQ(v2->image_token, 302);
}

TEST(QwenVisionConfig, ReadsTheQwen3FixtureConfig) {
  auto v = read_qwen_vl_vision(read_config("qwen3_vl"), kTextVocab, VisionKind::qwen3_vl);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::qwen3_vl);
  EXPECT_TRUE(v->present() && v->dynamic());
  EXPECT_EQ(std::make_tuple(v->n_layers, v->hidden_size, v->intermediate_size, v->n_heads, v->out_hidden_size),
            std::make_tuple(3, 32, 48, 2, 64));
  EXPECT_EQ(std::make_tuple(v->patch_size, v->merge, v->temporal_patch, v->num_position_embeddings),
            std::make_tuple(4, 2, 2, 36));
  EXPECT_EQ(v->deepstack_layers, (std::vector<int>{0, 1}));
  EXPECT_TRUE(v->fullatt_blocks.empty());
  EXPECT_EQ(v->hidden_act, "gelu_pytorch_tanh");
  EXPECT_FLOAT_EQ(v->rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(v->eps, 1e-6f);
  EXPECT_EQ(std::make_tuple(v->image_token, v->boi_token, v->eoi_token), std::make_tuple(302, 300, 301));
  EXPECT_EQ(v->patch_width(), 96);
}

TEST(QwenVisionConfig, LeftOutFieldsTakeTransformersDefaults) {
  const auto j = nlohmann::json::parse(R"({"vision_config": {}})");
  auto v = read_qwen_vl_vision(j, 152064, VisionKind::qwen2_5_vl);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(std::make_tuple(v->n_layers, v->hidden_size, v->intermediate_size, v->n_heads, v->out_hidden_size),
            std::make_tuple(32, 3584, 3420, 16, 3584));
  EXPECT_EQ(std::make_tuple(v->patch_size, v->merge, v->temporal_patch, v->window_size),
            std::make_tuple(14, 2, 2, 112));
  EXPECT_EQ(v->fullatt_blocks, (std::vector<int>{7, 15, 23, 31}));
  EXPECT_EQ(std::make_tuple(v->image_token, v->boi_token, v->eoi_token), std::make_tuple(151655, 151652, 151653));
  auto v2 = read_qwen_vl_vision(nlohmann::json::object(), 152064, VisionKind::qwen2_vl);
  ASSERT_TRUE(v2.has_value()) << v2.status().to_string();
  EXPECT_EQ(std::make_tuple(v2->n_layers, v2->hidden_size, v2->intermediate_size, v2->out_hidden_size),
            std::make_tuple(32, 1280, 5120, 3584));
  auto v3 = read_qwen_vl_vision(nlohmann::json::object(), 152064, VisionKind::qwen3_vl);  // Qwen3VLVisionConfig's
  ASSERT_TRUE(v3.has_value()) << v3.status().to_string();
  EXPECT_EQ(std::make_tuple(v3->n_layers, v3->hidden_size, v3->intermediate_size, v3->n_heads, v3->out_hidden_size),
            std::make_tuple(27, 1152, 4304, 16, 3584));
  EXPECT_EQ(std::make_tuple(v3->patch_size, v3->merge, v3->temporal_patch, v3->num_position_embeddings),
            std::make_tuple(16, 2, 2, 2304));
  EXPECT_EQ(v3->deepstack_layers, (std::vector<int>{8, 16, 24}));
  EXPECT_EQ(v3->hidden_act, "gelu_pytorch_tanh");
  EXPECT_FLOAT_EQ(v3->rope_theta, 10000.0f);
  EXPECT_EQ(std::make_tuple(v3->image_token, v3->boi_token, v3->eoi_token), std::make_tuple(151655, 151652, 151653));
  // The vision rotary's theta: rope_parameters.rope_theta, else rope_theta.
  auto rope = nlohmann::json::parse(R"({"vision_config": {"rope_theta": 500.0}})");
  EXPECT_FLOAT_EQ(read_qwen_vl_vision(rope, 152064, VisionKind::qwen3_vl).value().rope_theta, 500.0f);
  rope["vision_config"]["rope_parameters"] = {{"rope_type", "axial"}, {"rope_theta", 2000.0}};
  EXPECT_FLOAT_EQ(read_qwen_vl_vision(rope, 152064, VisionKind::qwen3_vl).value().rope_theta, 2000.0f);
}

TEST(QwenVisionConfig, TokenIdsComeFromTheTopLevelElseTextConfig) {
  auto j = read_config("qwen2_5_vl");
  j.erase("image_token_id");
  j.erase("vision_end_token_id");
  j["text_config"] = {{"image_token_id", 310}, {"vision_start_token_id", 311}, {"vision_end_token_id", 312}};
  auto v = read_qwen_vl_vision(j, kTextVocab, VisionKind::qwen2_5_vl);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(std::make_tuple(v->image_token, v->boi_token, v->eoi_token), std::make_tuple(310, 300, 312));
}

TEST(QwenVisionConfig, RefusesWhatTheTowerCannotRunNamingTheField) {
  struct Bad {
    std::string fixture;
    nlohmann::json vision;  // merged into vision_config
    nlohmann::json top;     // merged into the top level
    std::string says;
  };
  const std::vector<Bad> bad = {
      {"qwen2_5_vl", {{"hidden_act", "gelu"}}, {}, "vision_config.hidden_act 'gelu'; supported: silu"},
      {"qwen2_vl", {{"hidden_act", "silu"}}, {}, "vision_config.hidden_act 'silu'; supported: quick_gelu"},
      {"qwen2_vl", {{"in_chans", 4}}, {}, "vision_config.in_channels 4"},
      {"qwen2_5_vl", {{"num_heads", 3}}, {}, "num_heads 3"},
      {"qwen2_5_vl", {{"hidden_size", 24}, {"num_heads", 4}}, {}, "multiple of 4"},
      {"qwen2_5_vl", {{"window_size", 4}}, {}, "vision_config.window_size 4"},
      {"qwen2_5_vl", {{"fullatt_block_indexes", {1, 3}}}, {}, "vision_config.fullatt_block_indexes"},
      {"qwen2_5_vl", {{"fullatt_block_indexes", 1}}, {}, "vision_config.fullatt_block_indexes"},
      {"qwen2_5_vl", {{"depth", 0}}, {}, "vision_config.depth must be positive"},
      {"qwen2_vl", {{"embed_dim", 0}}, {}, "vision_config.embed_dim must be positive"},
      {"qwen2_vl", {{"mlp_ratio", "four"}}, {}, "'mlp_ratio'"},
      {"qwen2_5_vl", {{"patch_size", {14, 14}}}, {}, "'patch_size'"},
      {"qwen2_5_vl", {{"spatial_merge_size", 0}}, {}, "vision_config.spatial_merge_size"},
      {"qwen2_5_vl", {}, {{"image_token_id", 400}}, "image_token_id 400"},
      {"qwen2_5_vl", {}, {{"vision_config", 7}}, "vision_config is not an object"},
      {"qwen3_vl", {{"hidden_act", "gelu"}}, {}, "vision_config.hidden_act 'gelu'; supported: gelu_pytorch_tanh"},
      {"qwen3_vl", {{"num_position_embeddings", 35}}, {}, "vision_config.num_position_embeddings 35 must be a square"},
      {"qwen3_vl", {{"num_position_embeddings", 0}}, {}, "vision_config.num_position_embeddings 0"},
      {"qwen3_vl", {{"deepstack_visual_indexes", {0, 3}}}, {}, "vision_config.deepstack_visual_indexes holds 3"},
      {"qwen3_vl", {{"deepstack_visual_indexes", {1, 1}}}, {}, "vision_config.deepstack_visual_indexes holds 1 at 1"},
      {"qwen3_vl", {{"deepstack_visual_indexes", {1, 0}}}, {}, "vision_config.deepstack_visual_indexes holds 0 at 1"},
      {"qwen3_vl", {{"deepstack_visual_indexes", {-1}}}, {}, "vision_config.deepstack_visual_indexes holds -1"},
      {"qwen3_vl", {{"hidden_size", 24}, {"num_heads", 4}}, {}, "multiple of 4"},
      {"qwen3_vl", {{"in_channels", 1}}, {}, "vision_config.in_channels 1"},
      {"qwen3_vl", {{"rope_parameters", {{"rope_type", "yarn"}}}}, {}, "rope_parameters.rope_type 'yarn'"},
      {"qwen3_vl", {}, {{"image_token_id", 320}}, "image_token_id 320"},
  };
  for (const Bad& b : bad) {
    auto j = read_config(b.fixture);
    if (!b.vision.is_null()) j["vision_config"].update(b.vision);
    if (!b.top.is_null()) j.update(b.top);
    auto v = read_qwen_vl_vision(j, kTextVocab, kind_of(b.fixture));
    ASSERT_FALSE(v.has_value()) << b.says;
    EXPECT_NE(v.status().message().find(b.says), std::string::npos) << v.status().to_string();
  }
}

// ---- the Backend ops the towers added ----

TEST(QwenVision, GeluAndQuickGeluMatchTheirFormulas) {
  auto backend = make_cpu_backend({.n_threads = 2});
  std::vector<float> x;
  for (int i = -40; i <= 40; ++i) x.push_back(0.15f * static_cast<float>(i));
  auto buf = backend->allocate(x.size() * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  const Tensor t = buf->view(DType::f32, {1, static_cast<int64_t>(x.size())});
  std::vector<float> got(x.size());
  backend->upload(t, x.data());
  backend->gelu(t);
  backend->download(got.data(), t);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(got[i], 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))), 1e-6) << x[i];
  backend->upload(t, x.data());
  backend->quick_gelu(t);
  backend->download(got.data(), t);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(got[i], x[i] / (1.0 + std::exp(-1.702 * x[i])), 1e-6) << x[i];
}

}  // namespace
}  // namespace brigade
