// Gemma 3 with images (Gemma3ForConditionalGeneration) against transformers: the SigLIP tower and
// projector's features, and the language model's logits on prompts whose image tokens take those
// features and attend to their whole image (tests/fixtures/gemma3_vision, written by
// scripts/make_vision_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hf_fixture.h"
#include "tests/vision_fixture.h"
#include "models/gemma3_vision.h"
#include "models/image_processor.h"
#include "models/model.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::make_step;
using testing::max_diff;
using testing::run_step;
using testing::SeqChunk;

constexpr const char* kFixture = "gemma3_vision";
constexpr int32_t kImageToken = 302;
constexpr int kTokensPerImage = 16;
// Logits pass through the tower, the projector and the language model: fp32 both sides, sums
// in other orders.
constexpr float kTol = 5e-4f;

struct VisionCase {
  std::vector<int32_t> prompt;
  std::vector<int> images;  // which of the fixture's images, in the order of their blocks
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

struct VisionFixture {
  std::vector<std::shared_ptr<const std::vector<float>>> pixels;  // [3, 56, 56] each
  std::vector<std::vector<float>> features;                       // [16 * 64] each
  std::vector<VisionCase> cases;
};

// Gemma3ImageProcessor's rescale and normalisation of the fixture's bytes, in f32 as torch does.
VisionFixture read_vision_fixture() {
  VisionFixture f;
  auto text = read_text_file(fixture_dir(kFixture) + "/expected.json");
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  if (!text) return f;
  const auto j = nlohmann::json::parse(*text);
  for (const auto& img : j.at("images_u8")) {
    auto px = std::make_shared<std::vector<float>>();
    for (int v : img.get<std::vector<int>>()) px->push_back((static_cast<float>(v) / 255.0f - 0.5f) / 0.5f);
    f.pixels.push_back(std::move(px));
  }
  f.features = j.at("image_features").get<std::vector<std::vector<float>>>();
  for (const auto& c : j.at("cases"))
    f.cases.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                       c.at("logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>()});
  return f;
}

// The StepImages of a prompt at rows [row0, ...): one per run of image tokens, in order (Gemma 3's
// images have no grid: each is kTokensPerImage tokens).
std::vector<StepImage> images_of(const VisionFixture& f, const VisionCase& c, int32_t row0) {
  std::vector<StepImage> pixels;
  for (const auto& px : f.pixels) pixels.push_back({0, px});
  return testing::images_in_chunk(c.prompt, c.images, pixels, {.image = kImageToken},
                                  [](const StepImage&) { return kTokensPerImage; }, 0, SIZE_MAX, row0);
}

std::unique_ptr<Model> load_fixture(Backend& backend) {
  auto model = Model::load(fixture_dir(kFixture), backend, LoadOptions{.progress = false});
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  return model ? std::move(*model) : nullptr;
}

TEST(Gemma3Vision, TheTowerAndProjectorGiveTransformersImageFeatures) {
  const VisionFixture f = read_vision_fixture();
  ASSERT_EQ(f.pixels.size(), 3u);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto ck = Checkpoint::open(fixture_dir(kFixture));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const VisionConfig& v = (*ck)->config().vision;
  ASSERT_TRUE(v.present());
  EXPECT_EQ(v.n_patches(), 64);
  EXPECT_EQ(v.pool_kernel(), 2);
  WeightLoader w(**ck, *backend, std::nullopt);
  Gemma3Vision tower;
  ASSERT_TRUE(tower.load(w, *backend, v, 64).is_ok());
  std::vector<StepImage> images;
  for (const auto& px : f.pixels) images.push_back({0, px});
  auto out = backend->allocate(3 * kTokensPerImage * 64 * sizeof(float));
  ASSERT_TRUE(out.has_value());
  const Tensor feats = out->view(DType::f32, {3 * kTokensPerImage, 64});
  ASSERT_TRUE(tower.encode(images, feats).is_ok());
  std::vector<float> got(static_cast<size_t>(feats.numel()));
  backend->download(got.data(), feats);
  for (size_t i = 0; i < 3; ++i) {
    float worst = 0.0f;
    for (size_t e = 0; e < f.features[i].size(); ++e)
      worst = std::max(worst, std::fabs(got[i * f.features[i].size() + e] - f.features[i][e]));
    EXPECT_LE(worst, 1e-4f) << "image " << i;
  }
}

// Each prompt in one prefill: every position's logits, then transformers' greedy continuation
// decoded a token at a time. The second prompt holds two images, the third a 16-token image that
// the sliding layers' window of 8 cannot hold (a row still sees the image after it, not the part
// of it beyond the window before it).
TEST(Gemma3Vision, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const VisionFixture f = read_vision_fixture();
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_fixture(*backend);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->has_vision());
  constexpr int kPageSize = 16, kPages = 5;
  for (const VisionCase& c : f.cases) {
    auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    StepBatch step = make_step({{0, c.prompt, 0, true}}, kPageSize, kPages);
    step.images = images_of(f, c, 0);
    const std::vector<float> logits = run_step(*model, *backend, *kv, step);
    EXPECT_LE(max_diff(logits, 0, c.logits), kTol) << "prompt of " << c.prompt.size();
    const float* last = logits.data() + (c.prompt.size() - 1) * static_cast<size_t>(model->config().vocab_size);
    EXPECT_EQ(testing::greedy_decode(*model, *backend, *kv, last, static_cast<int>(c.prompt.size()), c.greedy.size(),
                                     kPageSize, kPages),
              c.greedy);
  }
}

// The three prompts as one step of three sequences, and each prompt in two chunks split between
// its images: the same logits as each alone in one step.
TEST(Gemma3Vision, BatchedAndChunkedPromptsGiveTheSameLogits) {
  const VisionFixture f = read_vision_fixture();
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_fixture(*backend);
  ASSERT_NE(model, nullptr);
  constexpr int kPageSize = 8, kPages = 10;
  auto kv = KvCache::allocate(*backend, model->kv_layout(3 * kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  std::vector<SeqChunk> chunks;
  std::vector<StepImage> images;
  int32_t row0 = 0;
  for (size_t s = 0; s < f.cases.size(); ++s) {
    chunks.push_back({static_cast<int>(s), f.cases[s].prompt, 0, true});
    for (const StepImage& im : images_of(f, f.cases[s], row0)) images.push_back(im);
    row0 += static_cast<int32_t>(f.cases[s].prompt.size());
  }
  StepBatch step = make_step(chunks, kPageSize, kPages);
  step.images = images;
  const std::vector<float> logits = run_step(*model, *backend, *kv, step);
  size_t at = 0;
  for (const VisionCase& c : f.cases) {
    EXPECT_LE(max_diff(logits, at, c.logits), kTol) << "batched prompt of " << c.prompt.size();
    at += c.prompt.size();
  }

  // Chunks: the second prompt cut after its first image block (row 19), the third before its image.
  for (auto [which, cut] : {std::pair{size_t{1}, size_t{19}}, {size_t{2}, size_t{10}}}) {
    const VisionCase& c = f.cases[which];
    auto kv2 = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv2.has_value());
    const std::vector<int32_t> head(c.prompt.begin(), c.prompt.begin() + static_cast<long>(cut));
    const std::vector<int32_t> tail(c.prompt.begin() + static_cast<long>(cut), c.prompt.end());
    const std::vector<StepImage> all = images_of(f, c, 0);
    StepBatch first = make_step({{0, head, 0, true}}, kPageSize, kPages), second = make_step({{0, tail, static_cast<int>(cut), true}}, kPageSize, kPages);
    for (const StepImage& im : all) {
      if (im.row < static_cast<int32_t>(cut)) first.images.push_back(im);
      else second.images.push_back({im.row - static_cast<int32_t>(cut), im.pixels});
    }
    std::vector<float> got = run_step(*model, *backend, *kv2, first);
    const std::vector<float> rest = run_step(*model, *backend, *kv2, second);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_LE(max_diff(got, 0, c.logits), kTol) << "prompt " << which << " in chunks cut at " << cut;
  }
}

// A step whose images do not fit its rows is refused before anything runs, with what was wrong.
TEST(Gemma3Vision, BadImageStepsAreRefusedNamingTheProblem) {
  const VisionFixture f = read_vision_fixture();
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_fixture(*backend);
  ASSERT_NE(model, nullptr);
  constexpr int kPageSize = 16, kPages = 4;
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const VisionCase& c = f.cases[0];  // its image block is rows 3..21, the image tokens 4..19
  auto refused = [&](StepBatch step, const std::string& why) {
    auto buf = backend->allocate(step.logit_rows.size() * 320 * sizeof(float));
    ASSERT_TRUE(buf.has_value());
    const Status st = model->forward(step, *kv, buf->view(DType::f32, {static_cast<int64_t>(step.logit_rows.size()), 320}));
    EXPECT_EQ(st.code(), StatusCode::invalid_argument) << why << ": " << st.to_string();
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  const StepBatch whole = make_step({{0, c.prompt, 0, false}}, kPageSize, kPages);
  StepBatch split = make_step({{0, std::vector<int32_t>(c.prompt.begin(), c.prompt.begin() + 12), 0, false}}, kPageSize, kPages);
  split.images = {{4, f.pixels[0]}};
  refused(split, "needs rows up to 20");
  // Nor may one continue from an earlier step: its tokens attend to one another.
  StepBatch continued = make_step({{0, std::vector<int32_t>(c.prompt.begin() + 12, c.prompt.begin() + 20), 12, false}},
                                  kPageSize, kPages);
  continued.images = {{0, f.pixels[0], 0, 0, 8}};
  refused(continued, "starts at its token 8: this model's image tokens attend to one another");
  StepBatch shifted = whole;
  shifted.images = {{3, f.pixels[0]}};  // the begin-of-image token is not an image token
  refused(shifted, "not the image token");
  StepBatch twice = whole;
  twice.images = {{4, f.pixels[0]}, {4, f.pixels[1]}};
  refused(twice, "two images claim row 4");
  StepBatch small = whole;
  small.images = {{4, std::make_shared<const std::vector<float>>(3 * 28 * 28, 0.0f)}};
  refused(small, "an image must be [3, 56, 56] pixels");
  // Two sequences: the image of the first may not run into the second's rows.
  StepBatch across = make_step({{0, std::vector<int32_t>(c.prompt.begin(), c.prompt.begin() + 10), 0, false},
                                {1, std::vector<int32_t>(12, kImageToken), 0, false}},
                               kPageSize, 2);
  across.images = {{4, f.pixels[0]}};
  refused(across, "runs past its sequence's rows");
}

// Images for a model without a vision tower, or whose backend lacks the vision ops, are refused
// (unsupported); its text prompts run as before.
TEST(Gemma3Vision, ATextModelRefusesImages) {
  const VisionFixture f = read_vision_fixture();
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = Model::load(fixture_dir("gemma3"), *backend, LoadOptions{.progress = false});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  EXPECT_FALSE((*model)->has_vision());
  auto kv = KvCache::allocate(*backend, (*model)->kv_layout(4, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  StepBatch step = make_step({{0, std::vector<int32_t>(20, 200), 0, false}}, 16, 4);  // its vocabulary is 256
  step.images = {{2, f.pixels[0]}};
  auto buf = backend->allocate(256 * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  const Status st = (*model)->forward(step, *kv, buf->view(DType::f32, {1, 256}));
  EXPECT_EQ(st.code(), StatusCode::unsupported) << st.to_string();
  EXPECT_NE(st.message().find("text only"), std::string::npos) << st.message();
}

// The model directory's processor and a PNG of the first image: decoding and preprocessing the
// file gives the fixture's pixels exactly (what `brigade generate --image` sends).
TEST(Gemma3Vision, AnImageFileBecomesThePixelsTransformersTook) {
  const VisionFixture f = read_vision_fixture();
  auto processor = model_image_processor(fixture_dir(kFixture), 56);
  ASSERT_TRUE(processor.has_value()) << processor.status().to_string();
  EXPECT_EQ(processor->height, 56);
  auto pixels = image_pixels(testing::read_bytes(fixture_dir(kFixture) + "/image0.png"), *processor);
  ASSERT_TRUE(pixels.has_value()) << pixels.status().to_string();
  EXPECT_EQ(*pixels, *f.pixels[0]);
  auto other_size = model_image_processor(fixture_dir(kFixture), 112);
  ASSERT_FALSE(other_size.has_value());
  EXPECT_NE(other_size.status().message().find("the vision tower takes 112x112"), std::string::npos)
      << other_size.status().message();
  auto defaults = model_image_processor(fixture_dir("gemma3"), 896);  // no processor file: Gemma 3's defaults
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_EQ(defaults->width, 896);
}

TEST(Gemma3Vision, VisionConfigsTheTowerCannotRunAreRefusedNamingTheField) {
  auto config = nlohmann::json::parse(read_text_file(fixture_dir(kFixture) + "/config.json").value());
  auto refused = [&](auto edit, const std::string& field) {
    nlohmann::json j = config;
    edit(j);
    auto c = parse_hf_config(j.dump());
    ASSERT_FALSE(c.has_value()) << field;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().message();
  };
  refused([](auto& j) { j["mm_tokens_per_image"] = 15; }, "mm_tokens_per_image");
  refused([](auto& j) { j["mm_tokens_per_image"] = 9; }, "mm_tokens_per_image");  // 3 does not divide 8 patches
  refused([](auto& j) { j["vision_config"]["patch_size"] = 5; }, "patch_size");
  refused([](auto& j) { j["vision_config"]["hidden_act"] = "gelu"; }, "hidden_act");
  refused([](auto& j) { j["vision_config"]["num_channels"] = 1; }, "num_channels");
  refused([](auto& j) { j["vision_config"]["num_attention_heads"] = 3; }, "num_attention_heads");
  refused([](auto& j) { j["image_token_index"] = 400; }, "image_token_index");
}

}  // namespace
}  // namespace brigade
