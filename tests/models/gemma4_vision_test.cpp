// Gemma 4's images against transformers 5 (tests/fixtures/gemma4_vision and gemma4_vision_ple,
// written by scripts/make_gemma4_vision_fixtures.py):
// - the processor (models/gemma4_image_processor.h): processing_gemma4's target size and soft
//   token count for many image sizes under four settings, and each fixture image's patch rows
//   from its PNG equal to Gemma4ImageProcessorPil's pixel_values;
// - the tower and embedder (models/gemma4_vision.h): each image's features against
//   get_image_features' pooler_output; with the clamps off, or the grid transposed, they move far;
// - the language model with images (Gemma4Model with the tower): every position's logits of
//   prompts holding images (<|image>, the image's <|image|> tokens, <image|>), the cached decode's
//   logits and greedy tokens; gemma4_vision's sliding layers see the whole image (dropping that
//   moves the logits far), gemma4_vision_ple's per-layer inputs read the pad token's row at the
//   image rows and its causal images may be cut into chunks;
// - read_gemma4_vision and the refusals by field.
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
#include "models/gemma4.h"
#include "models/gemma4_image_processor.h"
#include "models/gemma4_vision.h"
#include "models/gemma_config.h"
#include "models/image.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::encode_images;
using testing::fixture_dir;
using testing::fixture_json;
using testing::relative_error;

constexpr const char* kFixture = "gemma4_vision";
constexpr const char* kPleFixture = "gemma4_vision_ple";
constexpr int kTextHidden = 32;
constexpr int kTextVocab = 272;
constexpr int32_t kImage = 7, kBoi = 8;
// fp32 both sides, sums in other orders: an image's features relative to their largest magnitude.
constexpr float kFeatureTol = 2e-5f;
constexpr float kLogitTol = 5e-4f;

// The fixture's images as the tower takes them (the processor's patch rows and grid), and
// transformers' features of each ([tokens * text hidden]).
struct FixtureImages {
  std::vector<StepImage> pixels;
  std::vector<std::vector<float>> features;
};

// The fixture's pixel values: whole levels over 255 (rescale: float32(double(level) / 255)).
FixtureImages read_images(const std::string& fixture) {
  FixtureImages out;
  const nlohmann::json j = fixture_json(fixture, "expected.json");
  for (const auto& im : j.at("images")) {
    const auto bytes = decode_data_url("data:a;base64," + im.at("pixels_b64").get<std::string>()).value();
    auto px = std::make_shared<std::vector<float>>();
    for (uint8_t b : bytes) px->push_back(static_cast<float>(static_cast<double>(b) * (1.0 / 255.0)));
    const auto grid = im.at("grid").get<std::vector<int>>();
    out.pixels.push_back({0, std::move(px), grid.at(0), grid.at(1)});
  }
  out.features = testing::read_image_features(j);
  return out;
}

// ---- The processor ----

TEST(Gemma4ImageProcessor, TargetSizesAndTokenCountsAreTransformers) {
  int n = 0;
  const nlohmann::json j = fixture_json(kFixture, "expected.json");
  for (const auto& row : j.at("sizes")) {
    const auto hw = row.at("hw").get<std::vector<int>>();
    const auto want = row.at("target").get<std::vector<int>>();
    Gemma4ImageProcessorConfig c;
    c.patch_size = row.at("patch_size").get<int>();
    c.pooling_kernel_size = row.at("pooling_kernel_size").get<int>();
    c.max_soft_tokens = row.at("max_soft_tokens").get<int>();
    const auto got = gemma4_target_size(hw[0], hw[1], c.patch_size, c.max_patches(), c.pooling_kernel_size);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ(got->first, want[0]) << row.dump();
    EXPECT_EQ(got->second, want[1]) << row.dump();
    EXPECT_EQ(gemma4_soft_tokens(hw[0], hw[1], c).value(), row.at("tokens").get<int>()) << row.dump();
    ++n;
  }
  EXPECT_GE(n, 60);
  EXPECT_FALSE(gemma4_target_size(0, 5, 16, 2520, 3).has_value());
}

// Each fixture PNG through the processor of the fixture's preprocessor_config.json: the grid and
// every patch value equal transformers' (Pillow's bicubic resize reproduced byte for byte).
TEST(Gemma4ImageProcessor, PatchRowsFromThePngsAreTransformers) {
  const auto config = model_gemma4_image_processor(fixture_dir(kFixture), 4, 3);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  EXPECT_EQ(config->max_soft_tokens, 70);
  EXPECT_EQ(config->steps.resample, Resample::bicubic);
  EXPECT_FALSE(config->steps.do_normalize);
  const auto images = read_images(kFixture).pixels;
  for (size_t k = 0; k < images.size(); ++k) {
    const auto bytes = read_text_file(fixture_dir(kFixture) + "/image" + std::to_string(k) + ".png").value();
    const auto got = gemma4_image_pixels(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                                         *config);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ(got->grid_h, images[k].grid_h) << "image " << k;
    EXPECT_EQ(got->grid_w, images[k].grid_w) << "image " << k;
    ASSERT_EQ(got->pixels.size(), images[k].pixels->size()) << "image " << k;
    float worst = 0.0f;
    for (size_t i = 0; i < got->pixels.size(); ++i) worst = std::max(worst, std::fabs(got->pixels[i] - (*images[k].pixels)[i]));
    EXPECT_EQ(worst, 0.0f) << "image " << k;
  }
  // A tower of other patches is refused by field, and so is a max_soft_tokens transformers refuses.
  EXPECT_NE(model_gemma4_image_processor(fixture_dir(kFixture), 16, 3).status().message().find("patch_size"),
            std::string::npos);
  nlohmann::json bad = fixture_json(kFixture, "preprocessor_config.json");
  bad["max_soft_tokens"] = 100;
  EXPECT_NE(parse_gemma4_image_processor_config(bad).status().message().find("max_soft_tokens"), std::string::npos);
  bad = fixture_json(kFixture, "preprocessor_config.json");
  bad["image_processor_type"] = "Gemma3ImageProcessor";
  EXPECT_EQ(parse_gemma4_image_processor_config(bad).status().code(), StatusCode::unsupported);
}

// ---- The tower and embedder ----

using Tower = testing::LoadedTower<Gemma4Vision>;

// The fixture's tower under gemma3_tensors' names; `edit` edits the config read first.
std::unique_ptr<Tower> load_tower(const std::string& fixture, const std::function<void(VisionConfig&)>& edit = {}) {
  return testing::load_fixture_tower<Gemma4Vision>(
      fixture_dir(fixture), read_gemma4_vision(fixture_json(fixture, "config.json"), kTextVocab), kTextHidden,
      [](Tower&, std::map<std::string, RawTensor> m) { return gemma3_tensors(std::move(m)); }, edit);
}

// Each image alone, then all three in one call (each encoded on its own): each one's features.
TEST(Gemma4Vision, FeaturesAreTransformers) {
  for (const char* fixture : {kFixture, kPleFixture}) {
    const auto images = read_images(fixture);
    ASSERT_EQ(images.pixels.size(), 3u);
    auto t = load_tower(fixture);
    ASSERT_NE(t, nullptr);
    const float worst =
        testing::expect_features_alone_and_together(*t, images.pixels, images.features, {2, 0, 1}, kFeatureTol);
    std::printf("[ measured ] %s: largest feature difference relative to the largest feature: %.3g\n", fixture, worst);
  }
}

// The clamps (use_clipped_linears) and the axial positions each matter: without the clamps, or
// with the grid transposed (x and y swapped), the features move far past the tolerance.
TEST(Gemma4Vision, ClampsAndPositionsMatter) {
  const auto images = read_images(kFixture);
  auto unclamped = load_tower(kFixture, [](VisionConfig& v) { v.clipped_linears = false; });
  ASSERT_NE(unclamped, nullptr);
  auto t = load_tower(kFixture);
  ASSERT_NE(t, nullptr);
  float least_unclamped = INFINITY, least_swapped = INFINITY;
  for (size_t i = 0; i < images.pixels.size(); ++i) {
    const float unclamped_err = relative_error(encode_images(*unclamped, {images.pixels[i]}).at(0), images.features[i]);
    EXPECT_GT(unclamped_err, 100 * kFeatureTol) << "image " << i;
    StepImage swapped = images.pixels[i];
    std::swap(swapped.grid_h, swapped.grid_w);
    const float swapped_err = relative_error(encode_images(*t, {swapped}).at(0), images.features[i]);
    EXPECT_GT(swapped_err, 100 * kFeatureTol) << "image " << i;
    least_unclamped = std::min(least_unclamped, unclamped_err), least_swapped = std::min(least_swapped, swapped_err);
  }
  std::printf("[ measured ] relative feature difference at least %.3g without the clamps, %.3g transposed\n",
              least_unclamped, least_swapped);
  // A grid that is not whole pooling blocks, or pixels of the wrong count, are refused.
  auto buf = t->backend->allocate(sizeof(float) * 64 * kTextHidden);
  ASSERT_TRUE(buf.has_value());
  StepImage odd = images.pixels[0];
  odd.grid_h -= 1;
  EXPECT_EQ(t->tower.encode({&odd, 1}, buf->view(DType::f32, {1, kTextHidden})).code(), StatusCode::invalid_argument);
}

TEST(Gemma4VisionConfig, ReadsTheFixturesConfigAndRefusesByName) {
  const auto base = fixture_json(kFixture, "config.json");
  const auto v = read_gemma4_vision(base, kTextVocab);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::gemma4);
  EXPECT_TRUE(v->dynamic());
  EXPECT_EQ(v->hidden_size, 32);
  EXPECT_EQ(v->n_layers, 2);
  EXPECT_EQ(v->patch_size, 4);
  EXPECT_EQ(v->merge, 3);
  EXPECT_EQ(v->position_table, 128);
  EXPECT_TRUE(v->clipped_linears);
  EXPECT_TRUE(v->standardize);
  EXPECT_FLOAT_EQ(v->rope_theta, 100.0f);
  EXPECT_EQ(v->image_token, kImage);
  EXPECT_EQ(v->boi_token, kBoi);
  EXPECT_EQ(v->image_tokens(18, 30), 60);
  // parse_hf_config: the tower, bidirectional under "vision" (gemma4_vision) and not without it.
  const auto c = parse_hf_config(base.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_TRUE(c->vision.present());
  EXPECT_TRUE(c->vision.bidirectional);
  EXPECT_TRUE(c->vision.whole_images());
  EXPECT_TRUE(c->vision_off.empty());
  const auto ple = parse_hf_config(fixture_json(kPleFixture, "config.json").dump());
  ASSERT_TRUE(ple.has_value());
  EXPECT_FALSE(ple->vision.bidirectional);
  EXPECT_FALSE(ple->vision.whole_images());
  testing::expect_refused_by_name(base, {
      {[](auto& j) { j["vision_config"]["hidden_activation"] = "silu"; }, "hidden_activation 'silu'"},
      {[](auto& j) { j["vision_config"]["attention_bias"] = true; }, "vision_config.attention_bias"},
      {[](auto& j) { j["vision_config"]["num_key_value_heads"] = 1; }, "vision_config.num_key_value_heads"},
      {[](auto& j) { j["vision_config"]["head_dim"] = 8; }, "vision_config.head_dim"},
      {[](auto& j) { j["vision_config"]["rope_parameters"]["rope_type"] = "default"; }, "rope_type 'default'"},
      {[](auto& j) { j["vision_config"]["output_proj_dims"] = 64; }, "output_proj_dims"},
      {[](auto& j) { j["vision_config"]["pooling_kernel_size"] = 0; }, "pooling_kernel_size"},
      {[](auto& j) { j["image_token_id"] = 5000; }, "image_token_id 5000"},
  }, [](const nlohmann::json& j) { return read_gemma4_vision(j, kTextVocab); });
  nlohmann::json all = base;
  all["text_config"]["use_bidirectional_attention"] = "all";
  EXPECT_NE(parse_hf_config(all.dump()).status().message().find("use_bidirectional_attention"), std::string::npos);
}

// ---- The language model with images ----

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int> images;
  std::vector<std::vector<float>> logits, decode_logits;
  std::vector<int32_t> greedy;
};

std::vector<Case> read_cases(const std::string& fixture) {
  std::vector<Case> out;
  const nlohmann::json j = fixture_json(fixture, "expected.json");
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                   c.at("logits").get<std::vector<std::vector<float>>>(),
                   c.at("decode_logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>()});
  return out;
}

// The StepImages of the prompt's rows [from, to) at step rows (r - from): each image's run of
// <|image|> (after its <|image>), an image begun before `from` continuing at row 0.
std::vector<StepImage> images_of(const FixtureImages& images, const VisionConfig& v, const Case& c, size_t from = 0,
                                 size_t to = SIZE_MAX) {
  return testing::images_in_chunk(c.prompt, c.images, images.pixels, {.image = kImage, .begin = kBoi},
                                  [&v](const StepImage& im) { return v.image_tokens(im.grid_h, im.grid_w); }, from, to);
}

class Gemma4Images : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    images_ = read_images(GetParam());
    cases_ = read_cases(GetParam());
    ASSERT_EQ(cases_.size(), 2u);
    model_ = load({});
    ASSERT_NE(model_, nullptr);
  }
  std::unique_ptr<Model> load(const std::function<void(ModelConfig&)>& edit) {
    auto ck = Checkpoint::open(fixture_dir(GetParam()));
    EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
    if (!ck) return nullptr;
    ModelConfig c = (*ck)->config();
    if (edit) edit(c);
    auto model = load_gemma4(Checkpoint::from_memory((*ck)->path(), c, (*ck)->tensors()), *backend_,
                             LoadOptions{.max_batch_tokens = 256, .progress = false});
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    if (!model) return nullptr;
    keep_.push_back(std::move(*ck));
    return std::move(*model);
  }
  float logit_diff(const Model& m, const std::vector<float>& got, const std::vector<std::vector<float>>& want) const {
    return testing::logit_diff(got, static_cast<size_t>(m.config().vocab_size), want);
  }
  // Case c in chunks of `size` rows (whole when 0): every position's logits.
  std::vector<float> prefill(Model& m, const Case& c, size_t size, const KvCache& kv) {
    return testing::prefill_chunks(m, *backend_, kv, c.prompt, size, kPageSize, kPages, [&](size_t from, size_t to) {
      return images_of(images_, m.config().vision, c, from, to);
    });
  }
  static constexpr int kPageSize = 16, kPages = 12;
  std::unique_ptr<Backend> backend_ = make_cpu_backend({.n_threads = 2});
  std::vector<std::unique_ptr<Checkpoint>> keep_;
  FixtureImages images_;
  std::vector<Case> cases_;
  std::unique_ptr<Model> model_;
};

// Each prompt in one prefill, then transformers' greedy continuation decoded a token at a time on
// the cache: every prefill position's logits and each decode step's within tolerance.
TEST_P(Gemma4Images, PrefillAndCachedDecodeAreTransformers) {
  ASSERT_TRUE(model_->has_vision());
  float worst = 0.0f, worst_decode = 0.0f;
  const int vocab = model_->config().vocab_size;
  for (const Case& c : cases_) {
    auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    const std::vector<float> logits = prefill(*model_, c, 0, *kv);
    const float d = logit_diff(*model_, logits, c.logits);
    EXPECT_LE(d, kLogitTol) << GetParam() << ", prompt of " << c.prompt.size();
    worst = std::max(worst, d);
    int32_t next = testing::argmax(logits.data() + (c.prompt.size() - 1) * static_cast<size_t>(vocab), vocab);
    std::vector<int32_t> greedy;
    for (int n_past = static_cast<int>(c.prompt.size()); greedy.size() < c.greedy.size(); ++n_past) {
      greedy.push_back(next);
      const auto row = testing::run_step(*model_, *backend_, *kv, testing::make_step({{0, {next}, n_past, false}}, kPageSize, kPages));
      if (greedy.size() < c.decode_logits.size()) {
        const float dd = logit_diff(*model_, row, {c.decode_logits[greedy.size()]});
        EXPECT_LE(dd, kLogitTol) << GetParam() << ", decode step " << greedy.size();
        worst_decode = std::max(worst_decode, dd);
      }
      next = testing::argmax(row.data(), vocab);
    }
    EXPECT_EQ(greedy, c.greedy) << GetParam();
  }
  std::printf("[ measured ] %s: largest |logit difference| from transformers: prefill %.3g, cached decode %.3g\n",
              GetParam(), worst, worst_decode);
}

// Under "vision" an image runs whole in one step: a chunk that cuts one is refused, naming why.
// Causal images (gemma4_vision_ple) may be cut anywhere: chunks of 7 and 11 rows give the same
// logits, the features of a cut image kept between its steps.
TEST_P(Gemma4Images, ChunksCuttingImages) {
  const Case& c = cases_.at(0);
  auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  if (model_->config().vision.whole_images()) {
    StepBatch step = testing::make_step({{0, std::vector<int32_t>(c.prompt.begin(), c.prompt.begin() + 10), 0, true}},
                                        kPageSize, kPages);
    step.images = images_of(images_, model_->config().vision, c, 0, 10);
    auto buf = backend_->allocate(sizeof(float) * 10 * kTextVocab);
    ASSERT_TRUE(buf.has_value());
    const Status st = model_->forward(step, *kv, buf->view(DType::f32, {10, kTextVocab}));
    EXPECT_EQ(st.code(), StatusCode::invalid_argument);
    EXPECT_NE(st.message().find("needs rows up to"), std::string::npos) << st.message();
    return;
  }
  for (size_t size : {7, 11}) {
    auto fresh = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(fresh.has_value());
    EXPECT_LE(logit_diff(*model_, prefill(*model_, c, size, *fresh), c.logits), kLogitTol) << "chunks of " << size;
  }
}

// The mask and the placeholders' per-layer row each matter: gemma4_vision's logits without the
// sliding layers' bidirectional image rows, gemma4_vision_ple's with another token's per-layer
// row than the pad token's at the image rows, move far past the tolerance.
TEST_P(Gemma4Images, TheMaskAndThePadRowsMatter) {
  const bool ple = std::string(GetParam()) == kPleFixture;
  auto changed = load([ple](ModelConfig& c) {
    if (ple) c.gemma4.pad_token = kImage;
    else c.vision.bidirectional = false;
  });
  ASSERT_NE(changed, nullptr);
  const Case& c = cases_.at(0);
  auto kv = KvCache::allocate(*backend_, changed->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const float d = logit_diff(*changed, prefill(*changed, c, 0, *kv), c.logits);
  EXPECT_GT(d, 100 * kLogitTol) << GetParam();
  std::printf("[ measured ] %s: |logit difference| %.3g %s\n", GetParam(), d,
              ple ? "with another per-layer row at the images" : "with causal images on the sliding layers");
}

// An image token outside an image's run, and a video or audio placeholder, are refused by id.
TEST_P(Gemma4Images, StrayPlaceholdersAreRefused) {
  auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  auto buf = backend_->allocate(sizeof(float) * kTextVocab);
  ASSERT_TRUE(buf.has_value());
  for (int32_t id : {kImage, 10, 11}) {
    const Status st = model_->forward(testing::make_step({{0, {2, 20, id}, 0, false}}, kPageSize, kPages), *kv,
                                      buf->view(DType::f32, {1, kTextVocab}));
    EXPECT_EQ(st.code(), StatusCode::invalid_argument) << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Gemma4Images, ::testing::Values(kFixture, kPleFixture));

}  // namespace
}  // namespace brigade
